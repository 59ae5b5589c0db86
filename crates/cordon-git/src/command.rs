//! [`GitCommand`]: the one way cordon runs git.
//!
//! Every invocation gets the same hardening, because a repository cordon works on may be
//! hostile: its `.git/config` (and every file it includes) and its `.gitattributes` are
//! attacker-controlled. The rules:
//!
//! - Configuration outside the repository is not read (`GIT_CONFIG_NOSYSTEM=1`,
//!   `GIT_CONFIG_GLOBAL=/dev/null`, `core.attributesFile=/dev/null`, `GIT_ATTR_NOSYSTEM=1`),
//!   so results do not depend on the user's personal settings.
//! - Every inherited `GIT_*` variable is removed (`GIT_DIR`, `GIT_WORK_TREE`,
//!   `GIT_INDEX_FILE`, `GIT_CONFIG_PARAMETERS`, `GIT_EXTERNAL_DIFF`, `GIT_SSH_COMMAND`, ...):
//!   none may redirect git to another repository, index or program.
//! - The options in [`HARDENING_CONFIG`] are passed with `-c`, which beats the repository's
//!   configuration: no hooks, no fsmonitor, no pager, no credential helpers, no submodule
//!   recursion, no background gc or maintenance, no signature programs.
//! - Per-name drivers (`filter.<name>.smudge`, `diff.<name>.textconv`, ...) cannot be listed in
//!   advance: [`GitCommand::neutralize_drivers`] reads the configuration as this very command
//!   will see it and blanks each one found (see `neutralize.rs`).
//! - Diffs always get `--no-ext-diff --no-textconv`; output is read with `-z` where git has it.
//! - `safe.directory`: git only honours it from protected configuration, and cordon reads no
//!   global configuration, so cordon passes `-c safe.directory=<path>` for exactly the
//!   repository path the user named ([`crate::Repo::open`]), and for the explicit git
//!   directories and work trees derived from it (the common directory `open` found, the
//!   worktrees cordon created from it) — never for a directory found by discovery alone.
//!   Trusting a repository owned by another user is safe here because nothing its
//!   configuration names is run (the rules above).

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{GitError, GitErrorKind};

/// Configuration passed with `-c` to every git invocation.
///
/// Command-line configuration overrides the repository's, so none of these programs or
/// behaviours can be switched on by a hostile `.git/config`.
pub const HARDENING_CONFIG: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    // One index file per git directory: a split index keeps its shared part beside it, which
    // a workspace whose index is its base's (hard-linked) would not have.
    ("core.splitIndex", "false"),
    ("core.attributesFile", "/dev/null"),
    ("core.excludesFile", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("core.sshCommand", "false"),
    ("core.askPass", "false"),
    ("core.protectNTFS", "true"),
    ("core.protectHFS", "true"),
    ("core.sparseCheckout", "false"),
    ("credential.helper", ""),
    ("protocol.file.allow", "user"),
    ("protocol.ext.allow", "never"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("diff.external", ""),
    ("log.showSignature", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("color.ui", "false"),
    ("advice.detachedHead", "false"),
];

/// Environment variables set on every git invocation (after all `GIT_*` ones are removed).
pub const HARDENING_ENV: &[(&str, &str)] = &[
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_ATTR_NOSYSTEM", "1"),
    ("GIT_NO_REPLACE_OBJECTS", "1"),
    ("LC_ALL", "C"),
];

/// Where a git command runs: which repository, and which work tree if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitContext {
    /// Discover the repository from a directory, trusting it for `safe.directory`.
    Discover {
        /// The directory git starts from (the path the user named).
        dir: PathBuf,
    },
    /// An explicit git directory, with no work tree (`--git-dir=<dir>`).
    GitDir {
        /// The git directory (for a repository: its common directory).
        git_dir: PathBuf,
    },
    /// An explicit git directory and work tree (`--git-dir=<dir> --work-tree=<tree>`).
    ///
    /// The work tree's own `.git` file is never consulted, so code that ran in the work tree
    /// cannot point git elsewhere by rewriting it.
    WorkTree {
        /// The git directory of the worktree (`<common>/worktrees/<name>`).
        git_dir: PathBuf,
        /// The work tree; also the current directory of the command.
        work_tree: PathBuf,
    },
}

/// A program git is started through, which then executes `git` with the same arguments and
/// environment: cordon's sandbox helper, which first mounts an overlay workspace's layers
/// over its tree in a private namespace (the host never mounts it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    /// The program started instead of git.
    pub program: PathBuf,
    /// Its arguments before `git`.
    pub args: Vec<OsString>,
    /// Variables it needs (added after the inherited `GIT_*` ones are removed).
    pub env: Vec<(OsString, OsString)>,
}

/// One git invocation, hardened. Build with [`GitCommand::new`], then run.
#[derive(Debug, Clone)]
pub struct GitCommand {
    context: GitContext,
    args: Vec<OsString>,
    config: Vec<(String, String)>,
    env: Vec<(String, OsString)>,
    read_only: bool,
    launcher: Option<Launcher>,
    excludes_file: Option<PathBuf>,
}

/// When a [`GitCommand::run_bounded`] must end: at a deadline, or as soon as `stop` says so
/// (a cancel), whichever comes first.
#[derive(Clone, Copy)]
pub struct RunBounds<'a> {
    /// The instant past which git is killed.
    pub deadline: Option<Instant>,
    /// Polled while git runs; `true` kills it.
    pub stop: Option<&'a (dyn Fn() -> bool + Sync)>,
}

impl std::fmt::Debug for RunBounds<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunBounds")
            .field("deadline", &self.deadline)
            .field("stop", &self.stop.is_some())
            .finish()
    }
}

/// How often a bounded git command's deadline and stop are looked at.
const BOUNDS_POLL: Duration = Duration::from_millis(20);

/// The captured result of a successful git invocation.
#[derive(Debug, Clone)]
pub struct GitOutput {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error (warnings).
    pub stderr: Vec<u8>,
}

impl GitCommand {
    /// A git command in `context` with the given arguments.
    pub fn new<I, S>(context: &GitContext, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        GitCommand {
            context: context.clone(),
            args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
            config: Vec::new(),
            env: Vec::new(),
            read_only: false,
            launcher: None,
            excludes_file: None,
        }
    }

    /// Reads ignore patterns from `file` as the user's own ignore file (`core.excludesFile`,
    /// otherwise `/dev/null` here): patterns only, nothing it holds runs.
    pub fn excludes_file(mut self, file: &Path) -> Self {
        self.excludes_file = Some(file.to_owned());
        self
    }

    /// Starts git through `launcher` (see [`Launcher`]).
    pub fn launcher(mut self, launcher: Option<&Launcher>) -> Self {
        self.launcher = launcher.cloned();
        self
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable for this command (after the inherited `GIT_*` ones are
    /// removed), e.g. `GIT_OBJECT_DIRECTORY` for a scratch object store.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.env.push((key.to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Marks the command as reading only: git takes no optional locks (`GIT_OPTIONAL_LOCKS=0`),
    /// so it does not rewrite the index as a side effect.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Uses another index file (`GIT_INDEX_FILE`), e.g. a temporary copy.
    pub fn index_file(self, path: &Path) -> Self {
        self.env("GIT_INDEX_FILE", path)
    }

    /// Adds configuration overrides, passed through `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`
    /// (keys are passed verbatim there, whatever characters a subsection name holds).
    pub fn config(mut self, overrides: &[(String, String)]) -> Self {
        self.config.extend_from_slice(overrides);
        self
    }

    /// Reads the configuration as this command would see it and blanks every per-name driver
    /// that could run a program (filters, diff and merge drivers).
    pub fn neutralize_drivers(self) -> Result<Self, GitError> {
        let overrides = crate::neutralize::driver_overrides(&self.context)?;
        Ok(self.config(&overrides))
    }

    /// The arguments, for error messages.
    pub fn display_args(&self) -> Vec<String> {
        self.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn build(&self) -> Command {
        let mut cmd = match &self.launcher {
            Some(launcher) => {
                let mut cmd = Command::new(&launcher.program);
                cmd.args(&launcher.args).arg("git");
                cmd.envs(launcher.env.iter().map(|(k, v)| (k, v)));
                cmd
            }
            None => Command::new("git"),
        };
        for (key, _) in std::env::vars_os() {
            if key.as_encoded_bytes().starts_with(b"GIT_") {
                cmd.env_remove(&key);
            }
        }
        cmd.envs(HARDENING_ENV.iter().copied());
        if self.read_only {
            cmd.env("GIT_OPTIONAL_LOCKS", "0");
        }
        if !self.config.is_empty() {
            cmd.env("GIT_CONFIG_COUNT", self.config.len().to_string());
            for (i, (key, value)) in self.config.iter().enumerate() {
                cmd.env(format!("GIT_CONFIG_KEY_{i}"), key);
                cmd.env(format!("GIT_CONFIG_VALUE_{i}"), value);
            }
        }
        for (key, value) in &self.env {
            cmd.env(key, value);
        }
        cmd.arg("--no-pager");
        for (key, value) in HARDENING_CONFIG {
            match &self.excludes_file {
                Some(file) if *key == "core.excludesFile" => {
                    cmd.arg("-c").arg(prefixed("core.excludesFile=", file));
                }
                _ => {
                    cmd.arg("-c").arg(format!("{key}={value}"));
                }
            }
        }
        match &self.context {
            GitContext::Discover { dir } => {
                let mut safe = OsString::from("safe.directory=");
                safe.push(dir);
                cmd.arg("-c").arg(safe);
                cmd.current_dir(dir);
            }
            GitContext::GitDir { git_dir } => {
                cmd.arg("-c").arg(prefixed("safe.directory=", git_dir));
                cmd.arg(prefixed("--git-dir=", git_dir));
                cmd.current_dir(git_dir);
            }
            GitContext::WorkTree { git_dir, work_tree } => {
                cmd.arg("-c").arg(prefixed("safe.directory=", work_tree));
                cmd.arg(prefixed("--git-dir=", git_dir));
                cmd.arg(prefixed("--work-tree=", work_tree));
                cmd.current_dir(work_tree);
            }
        }
        cmd.args(&self.args);
        cmd
    }

    /// Runs the command and returns its output; a non-zero exit is an error.
    pub fn run(&self) -> Result<GitOutput, GitError> {
        self.run_with_stdin(None)
    }

    /// Runs the command with `input` on its standard input.
    pub fn run_with_input(&self, input: &[u8]) -> Result<GitOutput, GitError> {
        self.run_with_stdin(Some(input))
    }

    /// Runs the command in a process group of its own, killed whole (git and every helper it
    /// started: `git-remote-http`, `ssh`, pack programs) when `bounds`' deadline passes
    /// ([`GitErrorKind::TimedOut`]) or its `stop` says so ([`GitErrorKind::Stopped`]); any
    /// process of the group left when git exits is killed too. For commands that talk to
    /// another machine (a clone), which may never answer.
    pub fn run_bounded(&self, bounds: RunBounds<'_>) -> Result<GitOutput, GitError> {
        let args = self.display_args();
        let mut cmd = self.build();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| GitError::new(&args, GitErrorKind::Spawn(e)))?;
        let group = rustix::process::Pid::from_child(&child);
        let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
        let (status, out, err, ended) = std::thread::scope(|scope| {
            let drain = |pipe: Option<&mut dyn Read>| {
                let mut bytes = Vec::new();
                if let Some(pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                bytes
            };
            let out = scope.spawn(move || drain(stdout.as_mut().map(|p| p as &mut dyn Read)));
            let err = scope.spawn(move || drain(stderr.as_mut().map(|p| p as &mut dyn Read)));
            let mut ended = None;
            let status = loop {
                // Looked at without reaping: the group's id stays git's until it is reaped,
                // so the kill below can never reach an unrelated process.
                let exited = rustix::process::waitid(
                    rustix::process::WaitId::Pid(group),
                    rustix::process::WaitIdOptions::EXITED
                        | rustix::process::WaitIdOptions::NOWAIT
                        | rustix::process::WaitIdOptions::NOHANG,
                );
                match exited {
                    Ok(Some(_)) | Err(_) => {
                        kill_group(group);
                        break child.wait();
                    }
                    Ok(None) => {}
                }
                if ended.is_none() {
                    if bounds.stop.is_some_and(|stop| stop()) {
                        ended = Some(GitErrorKind::Stopped);
                    } else if bounds.deadline.is_some_and(|d| Instant::now() >= d) {
                        ended = Some(GitErrorKind::TimedOut);
                    }
                    if ended.is_some() {
                        kill_group(group);
                        continue;
                    }
                }
                std::thread::sleep(BOUNDS_POLL);
            };
            (
                status,
                out.join().unwrap_or_default(),
                err.join().unwrap_or_default(),
                ended,
            )
        });
        let status = status.map_err(|e| GitError::new(&args, GitErrorKind::Spawn(e)))?;
        if let Some(kind) = ended {
            return Err(GitError::new(&args, kind));
        }
        if status.success() {
            Ok(GitOutput {
                stdout: out,
                stderr: err,
            })
        } else {
            Err(GitError::new(
                &args,
                GitErrorKind::Failed {
                    code: status.code(),
                    stderr: String::from_utf8_lossy(&err).into_owned(),
                },
            ))
        }
    }

    fn run_with_stdin(&self, input: Option<&[u8]>) -> Result<GitOutput, GitError> {
        let args = self.display_args();
        let mut cmd = self.build();
        cmd.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| GitError::new(&args, GitErrorKind::Spawn(e)))?;
        let output = std::thread::scope(|scope| {
            if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
                // A write error (git exited early) shows up in git's status instead.
                scope.spawn(move || {
                    let _ = stdin.write_all(input);
                });
            }
            child.wait_with_output()
        })
        .map_err(|e| GitError::new(&args, GitErrorKind::Spawn(e)))?;
        if output.status.success() {
            Ok(GitOutput {
                stdout: output.stdout,
                stderr: output.stderr,
            })
        } else {
            Err(GitError::new(
                &args,
                GitErrorKind::Failed {
                    code: output.status.code(),
                    stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
                },
            ))
        }
    }
}

/// SIGKILL to every process of the group `group` (gone already: nothing to do).
fn kill_group(group: rustix::process::Pid) {
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
}

fn prefixed(prefix: &str, path: &Path) -> OsString {
    let mut arg = OsString::from(prefix);
    arg.push(path);
    arg
}

/// Splits `-z` output into its NUL-terminated records (a missing final NUL is tolerated).
pub(crate) fn split_nul(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let trimmed = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    let empty = trimmed.is_empty() && bytes.len() <= 1;
    trimmed.split(|&b| b == 0).filter(move |_| !empty)
}

/// The text of a one-line output, without its final newline.
pub(crate) fn one_line(args: &[String], stdout: &[u8]) -> Result<String, GitError> {
    let text = std::str::from_utf8(stdout).map_err(|_| {
        GitError::new(
            args,
            GitErrorKind::UnexpectedOutput("output is not UTF-8".to_owned()),
        )
    })?;
    let line = text.strip_suffix('\n').unwrap_or(text);
    if line.is_empty() || line.contains('\n') {
        return Err(GitError::new(
            args,
            GitErrorKind::UnexpectedOutput(format!("expected one line, got {text:?}")),
        ));
    }
    Ok(line.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_nul_handles_empty_and_unterminated_output() {
        assert_eq!(split_nul(b"").count(), 0);
        assert_eq!(
            split_nul(b"a\0b\0").collect::<Vec<_>>(),
            vec![&b"a"[..], b"b"]
        );
        assert_eq!(
            split_nul(b"a\0b").collect::<Vec<_>>(),
            vec![&b"a"[..], b"b"]
        );
    }
}
