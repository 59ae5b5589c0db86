//! The least a program that runs another costs: start, `std::process::Command::status`, exit,
//! nothing else (no timeout, no capture, no limits). Built like cordon (static, LTO), it is
//! the baseline `bench/sandbox-overhead.sh` measures `cordon run --no-sandbox` against, next
//! to the program run directly.
//!
//!   cargo build --release --example spawn_floor -p cordon-exec
//!   target/<host>/release/examples/spawn_floor /bin/true

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: spawn_floor PROGRAM [ARGS...]");
        std::process::exit(2);
    };
    match std::process::Command::new(&program).args(args).status() {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            let code = status.code();
            std::process::exit(code.unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
        }
        Err(e) => {
            eprintln!("spawn_floor: cannot run {}: {e}", program.to_string_lossy());
            std::process::exit(127);
        }
    }
}
