//! The `cordon` binary: dispatches the hidden helper entry points before anything else starts
//! (no thread, no runtime), then hands over to the CLI.
//!
//! `main` is the C entry point itself (`no_main`): std's runtime start-up is skipped. It reads
//! and parses `/proc/self/maps` (to place the main thread's stack-overflow guard) and sets up
//! an alternate signal stack: 110 K instructions, 8 % of a Rust hello world's CPU, at every one
//! of the thousands of starts a day. What of it matters is done here: SIGPIPE is ignored (a
//! write to a closed pipe fails with `EPIPE`, as in any Rust program) and `process::exit`
//! flushes stdout. A stack overflow then ends the process with SIGSEGV, without std's message.
// (The test harness of this binary brings its own `main`.)
#![cfg_attr(not(test), no_main)]
#![cfg_attr(test, allow(unused_imports))]

use std::ffi::{c_char, c_int};
use std::process::ExitCode;

#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    // SAFETY: making a signal ignored runs no code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let code = cordon::main();
    // `ExitCode` keeps its number private: find it among the 256 it can be.
    let code = (0..=255u8)
        .find(|&c| ExitCode::from(c) == code)
        .map_or(1, i32::from);
    std::process::exit(code)
}
