//! The `cordon` binary: hands over to the CLI ([`cordon::main`]).

fn main() -> std::process::ExitCode {
    cordon::main()
}
