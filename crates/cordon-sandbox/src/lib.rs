//! Kernel-enforced isolation for programs cordon runs: the policy side.
//!
//! A [`SandboxPolicy`] says what a program may see, change, reach and use. [`prepare`] checks
//! it against what this host can enforce and turns it, with a command, into a
//! [`PreparedCommand`]: the small helper executable `cordon-sandbox-init`, installed beside
//! `cordon` ([`helper_executable`]), started as `cordon-sandbox-init __sandbox-init -- PROGRAM
//! ARGS...` with the computed plan (mount steps, Landlock rules, rlimits, cgroups) in its
//! environment.
//!
//! The sandbox is split in two crates:
//!
//! - **this crate, the policy side** (no `unsafe`): the policy, the plan computed from it,
//!   [`prepare`], secret paths, host detection and [`doctor`];
//! - **`cordon-sandbox-init`, the helper side**: the code that runs inside the new
//!   namespaces, which builds the sandbox and runs the program: user, mount, PID, IPC, UTS, cgroup (and, unless `--network host`, network)
//!   namespaces; `pivot_root` into a fresh tmpfs holding read-only `nosuid,nodev` binds of the
//!   system directories and the needed files of `/etc`, the working directory read-write, a
//!   private `/tmp` and home, a fresh `/proc` and a minimal `/dev`, secrets masked even under
//!   binds; in the program's process rlimits, `no_new_privs`, no capabilities, Landlock (files,
//!   executable allowlist, signal and abstract-socket scoping) and a seccomp filter; memory and
//!   pids limits in a cgroup (v2 when delegated, else v1), measured and removed. It also holds
//!   the host probes that need raw system calls.
//!
//! The helper reports the program's status as a [`cordon_types::ChildReport`] on descriptor
//! [`cordon_types::CHILD_REPORT_FD`]; the executor runs it in supervised mode. [`prepare`]
//! fails, naming the fix, when the host cannot enforce part of the policy the user did not
//! explicitly give up ([`Degradation`]); [`doctor`] says what this host can enforce.
//!
//! ```no_run
//! use cordon_sandbox::{SandboxPolicy, prepare};
//!
//! let policy = SandboxPolicy::new("/work/project");
//! let cmd = prepare(&policy, "cargo".as_ref(), &["test".into()]).expect("host can sandbox");
//! assert_eq!(cmd.args[0], cordon_sandbox::INIT_ARG);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod canonical_dirs;
mod doctor;
mod error;
mod etc_snapshot;
mod helper;
mod host;
mod landlock_tier;
mod plan;
mod policy;
mod prepare;
mod scratch;
mod secrets;
mod tier;
mod trees;

pub use cordon_sandbox_init::INIT_ARG;
pub use doctor::{
    CgroupReport, Check, DOCTOR_SCHEMA, DoctorReport, DoctorTag, EnforcementPreview,
    WorkspacesReport, doctor,
};
pub use error::{SandboxError, SandboxErrorKind};
pub use etc_snapshot::SnapshotLease;
pub use helper::{HELPER_NAME, HELPER_PATH_ENV, helper_executable};
pub use host::inside_cordon_sandbox;
pub use plan::{
    SANDBOX_CA_BUNDLE, SANDBOX_HOME, SANDBOX_TMP, SANDBOX_WORKSPACE, protected_git_data,
};
pub use policy::{
    Access, Bind, CacheLayer, DEFAULT_TMPFS_BYTES, Degradation, EnvVar, LayeredTree, Limits,
    Replacement, SandboxPolicy,
};
pub use prepare::{
    CA_BUNDLE_VARIABLES, GIT_CONFIG, PROXY_PORT, PreparedCommand, git_config_env, prepare,
    proxy_env,
};
pub use scratch::Scratch;
pub use secrets::{is_secret_path, secret_paths};
pub use tier::tier_for;
pub use trees::{OVERLAY_EXEC_ENV, OverlayExec, TreeLauncher, UpperLayer, probe_trees};
