//! The one sandboxed-run path of cordon.
//!
//! Everything that runs a program for someone — `cordon run`, a verify stage, a session's
//! `exec`, a service job — calls [`run`] with a [`RunRequest`] that says only what differs
//! (where, which bounds, which network, which binds, which secrets). This crate owns the
//! chain they all share, so it cannot drift apart between callers:
//!
//! 1. **checks**: a program is given, the working directory exists and stays inside the
//!    workspace (symlinks resolved), and is not inside cordon's own state;
//! 2. **environment**: one allow-list of variables taken from cordon's environment
//!    ([`ENV_ALLOWLIST`]), then the caller's variables, then named secrets
//!    ([`program_env`]); a credential the proxy adds (`SandboxOptions::proxy`'s
//!    `credentials`) is looked up here too, and the program gets a placeholder in its place
//!    while the run's certificate authority and the CA bundle the sandbox shows are made;
//! 3. **policy**: the [`cordon_sandbox::SandboxPolicy`] (the working directory writable, a
//!    workspace's tree writable and its shared git data read-only, cordon's home masked,
//!    toolchains, network, limits) and its preparation, refused when the host cannot
//!    enforce it and the caller did not give that protection up;
//! 4. **redaction**: one rule ([`build_redactor`]): secret values, every secret-looking
//!    variable of cordon's environment and of the program's, the built-in token patterns
//!    and the caller's patterns — applied to every byte before any sink sees it, and to the
//!    command line, working directory and failure reason of the result;
//! 5. **supervised spawn** through [`cordon_exec::run`], output to the caller's sink and to
//!    the recording ([`RunRecorder`]; [`Recorder`] records in the run history);
//! 6. the **result**, redacted, with the sandbox summary and the run id ([`Ran`]).
//!
//! ```no_run
//! use cordon_runner::{Hooks, Isolation, RunRequest, SandboxOptions};
//!
//! let mut request = RunRequest::new(["cargo", "test"], "/work/project");
//! request.isolation = Isolation::Sandboxed(SandboxOptions::default());
//! let ran = cordon_runner::run(&request, Hooks::default()).expect("the run was supervised");
//! println!("{:?} after {} ms", ran.result.status, ran.result.duration_ms);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod credentials;
mod env;
mod error;
mod launch;
mod record;
mod redaction;
mod request;
mod run_files;

pub use env::{ENV_ALLOWLIST, program_env};
pub use error::{RunError, RunErrorClass, RunErrorKind};
pub use launch::{Hooks, PreparedRun, Ran, TranscriptTarget, prepare, run};
pub use record::{RecordError, Recorder, RunRecorder, TranscriptStats, transcript_notes};
pub use redaction::{RedactRules, build_redactor};
pub use request::{
    Bounds, Isolation, OverlayMount, RunRequest, SandboxOptions, TreeCache, WorkspaceMount,
};
pub use run_files::RunFiles;
