//! The `cordon` binary: dispatches the hidden helper entry points before anything else starts
//! (no thread, no runtime), then hands over to the CLI.

fn main() -> std::process::ExitCode {
    cordon::main()
}
