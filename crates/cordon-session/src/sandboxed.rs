//! Git run by cordon *inside* a session's sandbox.
//!
//! The session's repository belongs to the agent: its config, hooks, attributes, refs, even
//! its object directory (a symlink to anywhere) are the agent's to write. So cordon never
//! runs git on it from the host. Importing commits into it and bundling its branch run
//! through the one sandboxed-run path ([`cordon_runner::run`]), where git sees only the
//! session's tree and cordon's transfer directory, with cordon's hardening on every call.
//! What comes out — one bundle file — is then checked on the host like any hostile input.

use std::path::{Path, PathBuf};

use cordon_runner::{Bounds, Hooks, Isolation, Ran, RunRequest, SandboxOptions, WorkspaceMount};

use crate::error::{SessionError, SessionErrorKind};

/// Configuration every git call in the sandbox gets, on top of [`cordon_git::HARDENING_CONFIG`].
const EXTRA_CONFIG: &[(&str, &str)] = &[
    ("safe.directory", "*"),
    ("fetch.fsckObjects", "true"),
    ("transfer.fsckObjects", "true"),
    ("core.bigFileThreshold", "512m"),
];

/// A shell function `g` running git with cordon's hardening (`-c` beats the repository's
/// configuration), for the scripts below.
fn git_function() -> String {
    let mut text = String::from("g() { git --no-pager");
    for (key, value) in cordon_git::HARDENING_CONFIG.iter().chain(EXTRA_CONFIG) {
        text.push_str(&format!(" -c '{key}={value}'"));
    }
    text.push_str(" \"$@\"; }\n");
    text
}

/// One git script run in a session's sandbox.
pub(crate) struct SandboxedGit<'a> {
    /// What it is, for messages.
    pub step: &'static str,
    /// The writable root and working directory.
    pub root: &'a Path,
    /// Whether the root is read-only.
    pub read_only: bool,
    /// Host directories visible read-only.
    pub read_only_binds: Vec<PathBuf>,
    /// The root's overlay layers, when it is an overlay session's tree.
    pub overlay: Option<cordon_runner::OverlayMount>,
    /// The shell script (after the `g` function); its arguments are `$1`...
    pub script: &'static str,
    /// The script's arguments.
    pub args: Vec<String>,
}

impl SandboxedGit<'_> {
    /// Runs the script; its standard output when it exits 0.
    pub(crate) fn run(self) -> Result<String, SessionError> {
        let script = format!("set -eu\n{}{}", git_function(), self.script);
        let mut argv = vec!["sh".to_owned(), "-c".to_owned(), script, "sh".to_owned()];
        argv.extend(self.args);
        let mut request = RunRequest::new(argv, self.root);
        request.workspace = Some(WorkspaceMount {
            root: self.root.to_owned(),
            git_common_dir: None,
            read_only: self.read_only,
            overlay: self.overlay,
        });
        let mut options = SandboxOptions {
            toolchains: false,
            ..SandboxOptions::default()
        };
        options.binds = self
            .read_only_binds
            .into_iter()
            .map(read_only_bind)
            .collect();
        request.isolation = Isolation::Sandboxed(options);
        request.env = cordon_git::HARDENING_ENV
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        request.bounds = Bounds {
            timeout: std::time::Duration::from_secs(30 * 60),
            output_limit: 256 * 1024,
            ..Bounds::default()
        };
        let ran: Ran = cordon_runner::run(&request, Hooks::default())?;
        if ran.exit_code == 0 {
            let out = &ran.result.stdout;
            Ok(format!("{}{}", out.head, out.tail))
        } else {
            let err = &ran.result.stderr;
            let mut detail = format!("{}{}", err.head, err.tail).trim().to_owned();
            if detail.is_empty() {
                detail = ran
                    .result
                    .failure
                    .map(|f| f.reason)
                    .unwrap_or_else(|| format!("exit {}", ran.exit_code));
            }
            Err(SessionError::new(SessionErrorKind::SandboxedGit {
                step: self.step,
                detail,
            }))
        }
    }
}

fn read_only_bind(path: PathBuf) -> cordon_sandbox::Bind {
    cordon_sandbox::Bind {
        path,
        access: cordon_sandbox::Access::ReadOnly,
    }
}

/// Imports branch `src_ref` of the bundle in `bundle_dir` into the session's `branch`, as a
/// fast-forward only (`git merge --ff-only` when it is checked out).
pub(crate) const IMPORT_SCRIPT: &str = r#"bundle="$1"; src="$2"; branch="$3"
if [ "$(g symbolic-ref -q HEAD || true)" = "refs/heads/$branch" ]; then
  g fetch -q --no-tags --no-recurse-submodules "$bundle" "$src"
  g merge -q --ff-only --no-stat --no-verify FETCH_HEAD
else
  g fetch -q --no-tags --no-recurse-submodules "$bundle" "$src:refs/heads/$branch"
fi
"#;

/// Bundles the session's `branch` without what `base` has; prints `same` instead when the
/// branch is still at `base`, and the branch's commit otherwise.
pub(crate) const EXPORT_SCRIPT: &str = r#"gitdir="$1"; branch="$2"; base="$3"; out="$4"
tip=$(g --git-dir="$gitdir" rev-parse --verify -q "refs/heads/$branch^{commit}") || { echo "the session has no branch $branch" >&2; exit 3; }
if [ "$tip" = "$base" ]; then echo same; exit 0; fi
if g --git-dir="$gitdir" cat-file -e "$base^{commit}" 2>/dev/null; then
  g --git-dir="$gitdir" bundle create -q "$out" "refs/heads/$branch" "^$base"
else
  g --git-dir="$gitdir" bundle create -q "$out" "refs/heads/$branch"
fi
echo "$tip"
"#;
