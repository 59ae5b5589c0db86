//! The helper side of cordon's sandbox: the code that runs inside the new namespaces.
//!
//! # One way to start a sandbox
//!
//! The policy side (`cordon-sandbox`) decides what a program may do and writes it down as an
//! [`InitPlan`]. cordon then starts the helper executable, `cordon-sandbox-init` (installed
//! beside `cordon`), as `cordon-sandbox-init __sandbox-init -- PROGRAM ARGS...` ([`INIT_ARG`])
//! with the plan in its environment ([`PLAN_ENV`]) and the report pipe at
//! [`cordon_types::CHILD_REPORT_FD`]. Its `main` calls [`init_main`], which runs the plan in
//! three processes, as bubblewrap does:
//!
//! 1. **outer** (the helper as started, in the host's namespaces; `outer::run`, top to
//!    bottom): checks that the plan comes from a cordon of its own build, reads it, allocates
//!    everything the children need (argv, environment, the compiled seccomp filter), creates
//!    the cgroups, clones PID 1 into new user, mount, PID, IPC, UTS (and network) namespaces,
//!    writes PID 1's uid/gid maps and places it in the cgroups, waits for its status, reaps it,
//!    reads the cgroup counters and removes the cgroups, and writes one
//!    [`cordon_types::ChildReport`];
//! 2. **PID 1** (the new namespaces; `pid1::setup`, then `pid1::start_and_wait`): a cgroup
//!    namespace, loopback up, the root built and pivoted into, with a network allowlist the
//!    proxy's listening socket made on loopback and sent to cordon over
//!    [`cordon_types::CHILD_NETWORK_FD`], the host name; then it forks the program, reaps
//!    every orphan, forwards termination signals, and when the program ends kills and counts
//!    what it left behind. The program is always PID 2;
//! 3. **the program's process** (`child::exec`): rlimits, `no_new_privs`, no capabilities,
//!    Landlock, the seccomp filter ([`SyscallFilter`]), then `execve`.
//!
//! # Why this is sound
//!
//! - The helper is its own small, single-threaded program: no thread is ever started, so the
//!   `clone` without `CLONE_VM` that makes PID 1 is a `fork` (no lock can be held by another
//!   thread at the copy), and `unshare`/user namespaces, which need a single thread, work.
//!   PID 1 forks the program with the C library's `fork`.
//! - Everything that can fail for want of memory or bad input (C strings, the seccomp
//!   program) is prepared before the first clone; a failure at any step is reported as a
//!   set-up failure and the program never runs (fail closed).
//! - PID 1 waits for the outer helper's go (uid/gid maps, cgroups) before it builds anything,
//!   dies with the outer helper (`PR_SET_PDEATHSIG`), and is not dumpable; when PID 1 ends,
//!   the kernel kills everything left in its PID namespace, so nothing outlives the report.
//! - The program's own restrictions (Landlock, seccomp, no capabilities) are applied in its
//!   process after PID 1 forked it, so PID 1 keeps what it needs to supervise.
//!
//! With [`OVERLAY_EXEC_ENV`] instead of a plan, the helper does something much smaller for
//! cordon's host-side work on an overlay workspace: it mounts the workspace's layers in a
//! private user and mount namespace and executes the program (cordon's hardened git) there
//! ([`OverlayExec`]).
//!
//! The crate also holds the host probes that need raw system calls ([`probe`]), as safe
//! functions, so the policy side forbids `unsafe` altogether.
#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod capabilities;
mod cgroup;
mod child;
mod entry;
mod error;
mod landlock;
mod landlock_tier;
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

pub use entry::init_main;
pub use error::{SeccompError, SetupError};
pub use mounts::{HOSTNAME, ROOT_SOURCE, etc_hosts, inside_a_sandbox};
pub use overlay_exec::{OVERLAY_EXEC_ENV, OverlayExec};
pub use pid::{ProcessGroup, ProcessId};
pub use plan::{
    BUILD_ENV, CgroupPlan, FileIdentity, HELPER_BUILD, HELPER_ENV, INIT_ARG, InitPlan,
    LandlockPlan, MountOp, PLAN_ENV, PinnedPath, Rlimit, RlimitResource, SocketFamilies,
    UpperLayer,
};
pub use seccomp::{ExecMemory, FilterOptions, SyscallFilter};
