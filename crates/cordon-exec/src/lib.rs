//! Bounded execution: run one program with hard limits and report exactly what happened.
//!
//! [`run`] spawns the program described by a [`RunSpec`] and supervises it until it and every
//! process it started are gone:
//!
//! - a wall-clock **timeout** sends SIGTERM to the whole process tree, then SIGKILL after a
//!   grace period; descendants that daemonize (`setsid`, double fork) are found through a child
//!   subreaper and `/proc`, and die too;
//! - output is read continuously and kept **bounded** ([`capture`]: head and tail of each
//!   stream, with exact byte counts), while an [`OutputSink`] can stream every byte elsewhere
//!   (a terminal, a transcript) after an optional [`OutputFilter`] (redaction);
//! - a grandchild that holds stdout open cannot make cordon wait: after the program exits,
//!   output is drained for a short **leak window**, then leftovers are killed;
//! - a [`CancelHandle`] (wired to Ctrl-C by the CLI) ends the run early and still yields a
//!   result;
//! - resource usage comes from `wait4`, and the outcome is classified into a
//!   [`cordon_types::RunResult`] plus the conventional exit code ([`RunOutcome`]).
//!
//! The executor is synchronous and poll-based: one thread, no runtime. Async callers run it on
//! a blocking thread.
//!
//! ```no_run
//! use cordon_exec::{run, RunIo, RunSpec};
//!
//! let spec = RunSpec::new("sh", ["-c", "echo hello"]).timeout(std::time::Duration::from_secs(5));
//! let outcome = run(&spec, RunIo::default()).expect("cordon could run it");
//! assert_eq!(outcome.result.stdout.head, "hello\n");
//! assert_eq!(outcome.exit_code, 0);
//! ```
#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod cancel;
pub mod capture;
mod classify;
mod disk;
mod error;
mod io;
mod output;
mod pid;
mod plumbing;
mod process_tree;
mod pty;
mod runner;
mod signals;
mod spawn;
mod spec;
mod stdin;
mod supervisor;
mod watch;

pub use cancel::CancelHandle;
pub use disk::{DEFAULT_DISK_LIMIT, DiskGuard, tree_bytes_beyond};
pub use error::ExecError;
pub use io::{LimitGuard, OutputFilter, OutputSink, ReadyProbe, RunIo, Stream};
pub use process_tree::{children_of, descendants_of};
pub use runner::{RunOutcome, run};
pub use signals::signal_name;
pub use spec::{
    DEFAULT_GRACE, DEFAULT_LEAK_WINDOW, DEFAULT_OUTPUT_LIMIT, DEFAULT_TIMEOUT, EnvSpec, RunSpec,
    StdinMode,
};
