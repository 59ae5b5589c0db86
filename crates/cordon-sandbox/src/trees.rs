//! Host-side work on copy-on-write trees: running a program (cordon's hardened git) with a
//! tree's layers mounted over a host directory, in a private namespace of the helper's, so
//! that the host itself never mounts anything; and the probe that says whether this host can.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use cordon_sandbox_init::{BUILD_ENV, HELPER_BUILD, INIT_ARG};
pub use cordon_sandbox_init::{OVERLAY_EXEC_ENV, OverlayExec, UpperLayer};

use crate::error::SandboxError;

/// How to start a program with a copy-on-write tree mounted: run `program` with `args`, then
/// the program's own argv, with `env` added to its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeLauncher {
    /// The sandbox helper executable.
    pub program: PathBuf,
    /// `["__sandbox-init", "--"]`.
    pub args: Vec<OsString>,
    /// The tree, and the helper's build identity.
    pub env: Vec<(OsString, OsString)>,
}

impl TreeLauncher {
    /// A launcher for `tree`, through the helper executable ([`crate::helper_executable`]).
    pub fn new(tree: &OverlayExec) -> Result<TreeLauncher, SandboxError> {
        let helper = crate::helper::helper_executable()?;
        let json = serde_json::to_string(tree).expect("a tree serializes");
        Ok(TreeLauncher {
            program: helper,
            args: vec![INIT_ARG.into(), "--".into()],
            env: vec![
                (OVERLAY_EXEC_ENV.into(), json.into()),
                (BUILD_ENV.into(), HELPER_BUILD.into()),
            ],
        })
    }

    /// A command running `program` through the launcher.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args).arg(program);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }
}

/// Whether this host can mount a copy-on-write tree whose layers live in `scratch`'s file
/// system, the way workspaces use them (unprivileged overlayfs with `userxattr`, in a user
/// namespace): `Err` says why not. Makes and removes a small directory in `scratch`.
pub fn probe_trees(scratch: &Path) -> Result<(), String> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = scratch.join(format!(".probe-{}-{n}", std::process::id()));
    let result = (|| {
        let sub = |name: &str| dir.join(name);
        for name in ["lower", "upper", "work", "at"] {
            std::fs::create_dir_all(sub(name))
                .map_err(|e| format!("create {}: {e}", sub(name).display()))?;
        }
        std::fs::write(sub("lower/probe"), b"lower\n")
            .map_err(|e| format!("write {}: {e}", sub("lower/probe").display()))?;
        let canon = |p: PathBuf| {
            p.canonicalize()
                .map_err(|e| format!("{}: {e}", p.display()))
        };
        let tree = OverlayExec {
            mount_at: canon(sub("at"))?,
            lowers: vec![canon(sub("lower"))?],
            upper: Some(UpperLayer {
                upper: canon(sub("upper"))?,
                work: canon(sub("work"))?,
                volatile: false,
            }),
        };
        let launcher = TreeLauncher::new(&tree).map_err(|e| e.to_string())?;
        // Reads the lower's file and deletes it through the tree: a whiteout in the upper.
        let out = launcher
            .command("sh")
            .args([
                "-c",
                "read x < \"$1\"/probe && [ \"$x\" = lower ] && rm \"$1\"/probe \\
                 || { echo \"the tree did not show its lower layer\" >&2; exit 1; }",
            ])
            .arg("sh")
            .arg(&tree.mount_at)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("start {}: {e}", launcher.program.display()))?;
        if !out.status.success() {
            let why = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
            .trim()
            .to_owned();
            return Err(if why.is_empty() {
                format!("the probe exited with {}", out.status)
            } else {
                why
            });
        }
        // The lower layer is untouched; the deletion is a whiteout in the upper.
        let whiteout = std::fs::symlink_metadata(sub("upper/probe")).map_err(|e| e.to_string())?;
        if !sub("lower/probe").is_file() || !whiteout_like(&whiteout) {
            return Err("the overlay did not keep its layers apart".into());
        }
        Ok(())
    })();
    let _ = remove_probe(&dir);
    result
}

fn whiteout_like(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// Removes the probe's directory; overlayfs leaves `work/work` without permissions.
fn remove_probe(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let work = dir.join("work/work");
    if work.exists() {
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o700))?;
    }
    std::fs::remove_dir_all(dir)
}
