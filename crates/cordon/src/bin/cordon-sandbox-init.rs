//! `cordon-sandbox-init`: cordon's sandbox helper, installed beside `cordon` (`cargo install
//! --path crates/cordon` installs both). cordon starts it for every sandboxed run as
//! `cordon-sandbox-init __sandbox-init -- PROGRAM ARGS...` with the plan in its environment;
//! what it does is described in the `cordon-sandbox-init` crate. It is a program of its own,
//! not a mode of `cordon`, so that each sandbox start loads a small executable that holds
//! nothing but the helper's code.

fn main() {
    if std::env::args_os()
        .nth(1)
        .is_none_or(|a| a != cordon_sandbox_init::INIT_ARG)
    {
        eprintln!(
            "cordon-sandbox-init: this is cordon's sandbox helper; cordon starts it for each \
             sandboxed run (see `cordon run --help`)"
        );
        std::process::exit(2);
    }
    cordon_sandbox_init::init_main()
}
