//! `cordon-sandbox-init`: the sandbox helper as its own small executable.
//!
//! cordon starts this program (found next to the `cordon` binary) for every sandboxed run
//! instead of re-executing its own, much larger binary: loading it costs fewer page faults and
//! relocations, and nothing but the helper's code is mapped while it builds the sandbox. It is
//! called exactly as the `cordon __sandbox-init` entry point is (the same arguments, the plan
//! in the environment). A helper from another build than the cordon that started it (an older
//! install left beside a newer cordon) does not run the plan: it hands over to cordon's own
//! entry point, so the sandbox is always built by the code cordon shipped with.
//!
//! `main` is the C entry point itself (`no_main`), as cordon's: std's runtime start-up (a read
//! and parse of `/proc/self/maps`, an alternate signal stack) is skipped at every sandbox start;
//! SIGPIPE is ignored as std would.
// (The test harness of this binary brings its own `main`.)
#![cfg_attr(not(test), no_main)]
#![cfg_attr(test, allow(unused_imports))]

use std::ffi::{c_char, c_int};
use std::os::unix::process::CommandExt;

use cordon_sandbox_init::{BUILD_ENV, FALLBACK_ENV, HELPER_BUILD, INIT_ARG};

#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    // SAFETY: making a signal ignored runs no code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_none_or(|a| a != INIT_ARG) {
        eprintln!(
            "cordon-sandbox-init: this is cordon's sandbox helper; cordon runs it (see `cordon run --help`)"
        );
        std::process::exit(125);
    }
    if std::env::var_os(BUILD_ENV).is_none_or(|b| b != HELPER_BUILD) {
        let Some(fallback) = std::env::var_os(FALLBACK_ENV) else {
            eprintln!("cordon-sandbox-init: started without cordon's build identity: refused");
            std::process::exit(125);
        };
        // Only the plan's own descriptors are inherited (cordon marks the rest close-on-exec);
        // exec keeps them and the environment.
        let error = std::process::Command::new(&fallback)
            .args(&args[1..])
            .exec();
        eprintln!(
            "cordon-sandbox-init: cannot hand over to {}: {error}",
            std::path::Path::new(&fallback).display()
        );
        std::process::exit(125);
    }
    cordon_sandbox_init::init_main();
}
