//! [`Worktree`]: a linked worktree cordon created, addressed without trusting its contents.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::changes::{ChangedFile, RepoPath, parse_raw};
use crate::command::{GitCommand, GitContext, Launcher, split_nul};
use crate::error::{GitError, GitErrorKind};
use crate::layers::Layers;
use crate::repo::CommitId;

/// A linked worktree: its directory and its git directory (`<common>/worktrees/<name>`).
///
/// Commands run with an explicit `--git-dir` and `--work-tree`: the worktree's `.git` file
/// (which code running in the worktree can rewrite) is read once, right after creation, and
/// never again.
#[derive(Debug, Clone, PartialEq, Eq)]
///
/// An overlay workspace is a worktree too: its files are its layers' merged view, seen by git
/// through a [`Launcher`] that mounts them over `path` in a private namespace, and read
/// directly from the layers ([`Layers`]) where cordon checks paths itself.
pub struct Worktree {
    common_dir: PathBuf,
    git_dir: PathBuf,
    path: PathBuf,
    launcher: Option<Launcher>,
    layers: Option<Layers>,
}

/// What differs between a base commit and a worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeDiff {
    /// Every changed path, untracked new files included (ignored files excluded).
    pub files: Vec<ChangedFile>,
    /// The changes as a patch (`git diff --binary`), when asked for.
    pub patch: Option<Vec<u8>>,
    /// Untracked directories that are git repositories themselves (`sub/.git`): left out of
    /// `files` and `patch`, since a patch cannot carry them.
    pub nested_repositories: Vec<RepoPath>,
    /// The files among `files` that were untracked (new, not staged, not ignored).
    pub untracked: Vec<RepoPath>,
}

impl Worktree {
    /// A worktree from known locations (as stored in a workspace record).
    pub fn from_parts(common_dir: PathBuf, git_dir: PathBuf, path: PathBuf) -> Worktree {
        Worktree {
            common_dir,
            git_dir,
            path,
            launcher: None,
            layers: None,
        }
    }

    /// The same worktree whose files are the merged view of `layers`, which git reaches
    /// through `launcher` (see [`Launcher`]).
    pub fn with_layers(mut self, layers: Layers, launcher: Launcher) -> Worktree {
        self.layers = Some(layers);
        self.launcher = Some(launcher);
        self
    }

    /// The worktree's files as cordon reads them itself: its layers, or its directory.
    pub fn tree(&self) -> Layers {
        self.layers
            .clone()
            .unwrap_or_else(|| Layers::dir(self.path.clone()))
    }

    /// A git command that reads or writes the worktree's files.
    pub(crate) fn on_files<I, S>(&self, args: I) -> GitCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        GitCommand::new(&self.context(), args).launcher(self.launcher.as_ref())
    }

    /// Reads the `.git` file of a worktree that was just created.
    pub(crate) fn from_dot_git(common_dir: PathBuf, path: &Path) -> Result<Worktree, GitError> {
        let dot_git = path.join(".git");
        let text = std::fs::read_to_string(&dot_git).map_err(|source| {
            GitError::new(
                &["worktree".to_owned(), "add".to_owned()],
                GitErrorKind::Io {
                    path: dot_git.clone(),
                    source,
                },
            )
        })?;
        let Some(git_dir) = text
            .strip_prefix("gitdir: ")
            .map(|t| t.trim_end_matches('\n'))
        else {
            return Err(GitError::new(
                &["worktree".to_owned(), "add".to_owned()],
                GitErrorKind::UnexpectedOutput(format!("unexpected .git file {text:?}")),
            ));
        };
        Ok(Worktree {
            common_dir,
            git_dir: path.join(git_dir),
            path: path.to_owned(),
            launcher: None,
            layers: None,
        })
    }

    /// The work tree directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The worktree's own git directory.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The repository's common git directory.
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    pub(crate) fn context(&self) -> GitContext {
        GitContext::WorkTree {
            git_dir: self.git_dir.clone(),
            work_tree: self.path.clone(),
        }
    }

    /// Writes the files of `commit` into the worktree (index and files) with `reset --hard`,
    /// run in the worktree's own context with every configured driver blanked, so no filter
    /// of the repository runs (see [`GitCommand::neutralize_drivers`]).
    pub fn populate(&self, commit: &CommitId) -> Result<(), GitError> {
        GitCommand::new(
            &self.context(),
            ["reset", "--hard", "--quiet", "--no-recurse-submodules"],
        )
        .arg(commit.as_str())
        .neutralize_drivers()?
        .run()
        .map(drop)
    }

    /// What changed between `base` and the files now in the worktree, with the patch if
    /// `with_patch`.
    ///
    /// The worktree's files are staged into a scratch index and a scratch object directory
    /// (the repository's objects serve as an alternate), so neither the worktree's index nor
    /// the repository's object store is written.
    pub fn diff(&self, base: &CommitId, with_patch: bool) -> Result<WorktreeDiff, GitError> {
        self.diff_with(base, with_patch, &self.git_dir, None)
    }

    /// Like [`Worktree::diff`], with the scratch index and objects in a directory made under
    /// `scratch_parent` (removed afterwards) and the user's ignore file `excludes` read by every
    /// git command; the patch only when something changed.
    pub(crate) fn diff_with(
        &self,
        base: &CommitId,
        with_patch: bool,
        scratch_parent: &Path,
        excludes: Option<&Path>,
    ) -> Result<WorktreeDiff, GitError> {
        let scratch = Scratch::new(scratch_parent)?;
        if let Ok(index) = std::fs::read(self.git_dir.join("index")) {
            std::fs::write(&scratch.index, index).map_err(|source| {
                GitError::new(
                    &["diff".to_owned()],
                    GitErrorKind::Io {
                        path: scratch.index.clone(),
                        source,
                    },
                )
            })?;
        }
        let staged = |args: &[&str]| {
            let cmd = self.on_files(args);
            match excludes {
                Some(file) => cmd.excludes_file(file),
                None => cmd,
            }
            .index_file(&scratch.index)
            .env("GIT_OBJECT_DIRECTORY", scratch.objects.as_os_str())
            .env(
                "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                self.common_dir.join("objects").as_os_str(),
            )
        };
        // Nested repositories (git lists them as `dir/`) would be added as gitlinks, or fail
        // the whole `add` when they have no commit: they are excluded and reported.
        let list = self.on_files(["ls-files", "--others", "--exclude-standard", "-z"]);
        let untracked = match excludes {
            Some(file) => list.excludes_file(file),
            None => list,
        }
        .read_only()
        .index_file(&scratch.index)
        .neutralize_drivers()?
        .run()?;
        let nested_repositories: Vec<RepoPath> = split_nul(&untracked.stdout)
            .filter_map(|p| p.strip_suffix(b"/"))
            .map(|p| RepoPath::from_bytes(p.to_vec()))
            .collect();
        let untracked: Vec<RepoPath> = split_nul(&untracked.stdout)
            .filter(|p| !p.ends_with(b"/"))
            .map(|p| RepoPath::from_bytes(p.to_vec()))
            .collect();
        let mut add = staged(&["add", "--all", "--", "."]);
        for nested in &nested_repositories {
            let mut spec = OsString::from(":(exclude,literal)");
            spec.push(nested.as_path());
            add = add.arg(spec);
        }
        add.neutralize_drivers()?.run()?;
        const DIFF: [&str; 7] = [
            "diff",
            "--cached",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--find-renames",
            "--ignore-submodules=none",
        ];
        let raw = staged(&DIFF).args(["--raw", "-z", "--no-abbrev", base.as_str(), "--"]);
        let out = raw.run()?;
        let files = parse_raw(&out.stdout).map_err(|detail| {
            GitError::new(&raw.display_args(), GitErrorKind::UnexpectedOutput(detail))
        })?;
        let patch = if with_patch && !files.is_empty() {
            Some(
                staged(&DIFF)
                    .args(["--binary", "--full-index", base.as_str(), "--"])
                    .run()?
                    .stdout,
            )
        } else {
            None
        };
        let patch = patch.or_else(|| with_patch.then(Vec::new));
        Ok(WorktreeDiff {
            files,
            patch,
            nested_repositories,
            untracked,
        })
    }
}

/// A scratch index and object directory inside the worktree's git directory, removed on drop.
struct Scratch {
    dir: PathBuf,
    index: PathBuf,
    objects: PathBuf,
}

impl Scratch {
    fn new(git_dir: &Path) -> Result<Scratch, GitError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = git_dir.join(format!("cordon-scratch-{}-{n}", std::process::id()));
        let objects = dir.join("objects");
        std::fs::create_dir_all(&objects).map_err(|source| {
            GitError::new(
                &["diff".to_owned()],
                GitErrorKind::Io {
                    path: objects.clone(),
                    source,
                },
            )
        })?;
        Ok(Scratch {
            index: dir.join("index"),
            objects,
            dir,
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
