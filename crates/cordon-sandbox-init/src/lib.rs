//! The helper side of cordon's sandbox: the code that runs inside the new namespaces.
//!
//! The policy side (`cordon-sandbox`) decides what a program may do and writes it down as an
//! [`InitPlan`]; it starts a binary with the arguments `__sandbox-init -- PROGRAM ARGS...`
//! ([`INIT_ARG`]) and the plan in its environment ([`PLAN_ENV`]). That binary calls
//! [`init_main`] first thing in `main`, which executes the plan in three processes:
//!
//! - **outer** (host namespaces): reads the plan, compiles the seccomp filter, creates the
//!   cgroups, clones PID 1 into new user, mount, PID, IPC, UTS (and network) namespaces,
//!   writes its uid/gid maps, waits, reads the cgroup counters, removes the cgroups and
//!   writes the [`cordon_types::ChildReport`] to descriptor
//!   [`cordon_types::CHILD_REPORT_FD`];
//! - **PID 1** (new namespaces): builds the root and pivots into it, brings loopback up and,
//!   with a network allowlist, makes the proxy's listening socket on loopback and sends it to
//!   cordon over descriptor [`cordon_types::CHILD_NETWORK_FD`]; forks the program, reaps
//!   every orphan, forwards termination signals, and when the program ends kills and counts
//!   what it left behind;
//! - **the program's process**: rlimits, `no_new_privs`, no capabilities, Landlock, the
//!   seccomp filter ([`SyscallFilter`]), then `execve`.
//!
//! With [`OVERLAY_EXEC_ENV`] instead of a plan, the helper does something much smaller for
//! cordon's host-side work on an overlay workspace: it mounts the workspace's layers in a
//! private user and mount namespace and executes the program (cordon's hardened git) there
//! ([`OverlayExec`]).
//!
//! The crate also holds the host probes that need raw system calls ([`probe`]), as safe
//! functions, so the policy side forbids `unsafe` altogether.
//!
//! It depends on little (libc, rustix, landlock, seccompiler, serde) and starts no thread,
//! so that it can become its own small executable.
//!
//! ```no_run
//! // First thing in `main`, before any thread starts:
//! if std::env::args_os().nth(1).is_some_and(|a| a == cordon_sandbox_init::INIT_ARG) {
//!     cordon_sandbox_init::init_main();
//! }
//! // ... the rest of the program
//! ```
#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod capabilities;
mod cgroup;
mod child;
mod entry;
mod error;
mod in_process;
mod landlock;
mod leftovers;
mod mounts;
mod network;
mod outer;
mod overlay_exec;
mod pid;
mod pid1;
mod pinned;
mod plan;
pub mod probe;
mod proxy_socket;
mod seccomp;
mod status;
mod sys;

pub use entry::{dispatch_helper, has_helper_entry, init_main};
pub use error::{SeccompError, SetupError};
pub use in_process::InProcessInit;
pub use mounts::{HOSTNAME, etc_hosts};
pub use overlay_exec::{OVERLAY_EXEC_ENV, OverlayExec};
pub use pid::{ProcessGroup, ProcessId};
pub use plan::{
    BUILD_ENV, CgroupPlan, FALLBACK_ENV, FileIdentity, HELPER_BUILD, HELPER_ENV, INIT_ARG,
    InitPlan, LandlockPlan, MountOp, NETWORK_THREAD_ENV, NetworkThread, PLAN_ENV, PinnedPath,
    Rlimit, RlimitResource, UpperLayer,
};
pub use seccomp::SyscallFilter;
