//! Bundles, refs and fast-forwards: what a session needs to move commits between a host
//! repository and an isolated one.
//!
//! A bundle that crosses the boundary is hostile input. [`BundleHeader::read`] parses its
//! header without git (refs, prerequisites, capabilities) so the caller can refuse anything
//! but the one expected ref before git reads the pack; [`Repo::verify_bundle`] then asks git
//! whether the bundle is complete relative to the repository (prerequisites present), and
//! [`Repo::fetch_bundle`] imports it with every object checked (`fetch.fsckObjects`).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::command::{GitCommand, GitContext, one_line, split_nul};
use crate::error::{GitError, GitErrorKind};
use crate::repo::{CommitId, Repo};

/// The most bytes of a bundle's header that are read (a header with more refs than this is
/// refused: a session bundle names one ref).
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// Configuration that makes a fetch check every object it receives.
const FSCK_CONFIG: [(&str, &str); 3] = [
    ("fetch.fsckObjects", "true"),
    ("transfer.fsckObjects", "true"),
    ("fetch.writeCommitGraph", "false"),
];

/// The header of a bundle file (format v2 or v3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleHeader {
    /// 2 or 3.
    pub version: u8,
    /// The refs the bundle carries: object id and full ref name.
    pub refs: Vec<(CommitId, String)>,
    /// The commits the receiving repository must already have.
    pub prerequisites: Vec<CommitId>,
    /// v3 capabilities (`object-format=sha1`, ...).
    pub capabilities: Vec<String>,
}

impl BundleHeader {
    /// Parses the header of the bundle at `path`; anything that is not a well-formed bundle
    /// header followed by a pack is [`GitErrorKind::BadBundle`].
    pub fn read(path: &Path) -> Result<BundleHeader, GitError> {
        let file = std::fs::File::open(path).map_err(|source| io_error(path, source))?;
        let mut reader = BufReader::new(file.take(MAX_HEADER_BYTES));
        let bad = |why: String| GitError::new(&["bundle".to_owned()], GitErrorKind::BadBundle(why));
        let mut line = Vec::new();
        let mut next_line = |reader: &mut BufReader<_>| -> Result<Option<String>, GitError> {
            line.clear();
            reader
                .read_until(b'\n', &mut line)
                .map_err(|source| io_error(path, source))?;
            if line.last() != Some(&b'\n') {
                return Ok(None);
            }
            line.pop();
            String::from_utf8(line.clone())
                .map(Some)
                .map_err(|_| bad("a header line is not UTF-8".to_owned()))
        };
        let version = match next_line(&mut reader)?.as_deref() {
            Some("# v2 git bundle") => 2,
            Some("# v3 git bundle") => 3,
            _ => {
                return Err(bad(
                    "it does not start with a git bundle signature".to_owned()
                ));
            }
        };
        let mut header = BundleHeader {
            version,
            refs: Vec::new(),
            prerequisites: Vec::new(),
            capabilities: Vec::new(),
        };
        loop {
            let Some(text) = next_line(&mut reader)? else {
                return Err(bad(
                    "the header does not end (cut short, or too large)".to_owned()
                ));
            };
            if text.is_empty() {
                break;
            }
            if let Some(capability) = text.strip_prefix('@') {
                if version != 3 || !header.refs.is_empty() || !header.prerequisites.is_empty() {
                    return Err(bad(format!("misplaced capability line {text:?}")));
                }
                header.capabilities.push(capability.to_owned());
            } else if let Some(rest) = text.strip_prefix('-') {
                let id = rest.split(' ').next().unwrap_or_default();
                let id = CommitId::parse(id)
                    .ok_or_else(|| bad(format!("bad prerequisite line {text:?}")))?;
                header.prerequisites.push(id);
            } else {
                let (id, name) = text
                    .split_once(' ')
                    .ok_or_else(|| bad(format!("bad ref line {text:?}")))?;
                let id =
                    CommitId::parse(id).ok_or_else(|| bad(format!("bad ref line {text:?}")))?;
                header.refs.push((id, name.to_owned()));
            }
        }
        let mut magic = [0u8; 4];
        reader
            .read_exact(&mut magic)
            .map_err(|_| bad("no pack follows the header".to_owned()))?;
        if &magic != b"PACK" {
            return Err(bad("no pack follows the header".to_owned()));
        }
        Ok(header)
    }
}

fn io_error(path: &Path, source: std::io::Error) -> GitError {
    GitError::new(
        &["bundle".to_owned()],
        GitErrorKind::Io {
            path: path.to_owned(),
            source,
        },
    )
}

/// Checks a branch name the way git does (`git check-ref-format refs/heads/<name>`), and
/// refuses names git would read as an option or a revision expression.
pub fn check_branch_name(name: &str) -> Result<(), GitError> {
    let refused = |why: &str| {
        GitError::new(
            &["check-ref-format".to_owned()],
            GitErrorKind::BadRefName {
                name: name.to_owned(),
                reason: why.to_owned(),
            },
        )
    };
    if name.is_empty() || name.starts_with('-') || name == "HEAD" || name.contains('@') {
        return Err(refused("not a branch name"));
    }
    let context = GitContext::Discover { dir: "/".into() };
    GitCommand::new(&context, ["check-ref-format"])
        .arg(format!("refs/heads/{name}"))
        .read_only()
        .run()
        .map(drop)
        .map_err(|_| refused("git does not accept it as a branch name"))
}

impl Repo {
    /// Creates an empty repository with a work tree at `path` (which must not exist or be
    /// empty), its `HEAD` on `branch`.
    pub fn init(path: &Path, branch: &str) -> Result<Repo, GitError> {
        check_branch_name(branch)?;
        let parent = path.parent().unwrap_or(Path::new("/")).to_owned();
        let context = GitContext::Discover { dir: parent };
        GitCommand::new(&context, ["init", "-q"])
            .arg(format!("--initial-branch={branch}"))
            .arg(path)
            .run()?;
        Ok(Repo::with_work_tree(path.join(".git"), path.to_owned()))
    }

    /// A repository from its git directory and work tree, both chosen by cordon (never read
    /// from a `.git` file).
    pub fn with_work_tree(git_dir: PathBuf, work_tree: PathBuf) -> Repo {
        Repo::from_parts(git_dir, Some(work_tree))
    }

    fn git_dir_context(&self) -> GitContext {
        GitContext::GitDir {
            git_dir: self.common_dir().to_owned(),
        }
    }

    /// The full name of a ref that `rev` names (`main` → `refs/heads/main`, `HEAD` → the
    /// checked-out branch), `None` when it names no ref (a commit id, `HEAD` detached).
    pub fn full_ref_name(&self, rev: &str) -> Result<Option<String>, GitError> {
        // `rev-parse --symbolic-full-name` prints `--end-of-options` itself: refuse options.
        if rev.starts_with('-') {
            return Ok(None);
        }
        let cmd = GitCommand::new(
            &self.git_dir_context(),
            ["rev-parse", "--symbolic-full-name", rev],
        )
        .read_only();
        let out = cmd.run()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.trim_end();
        Ok((line.starts_with("refs/") && !line.contains('\n')).then(|| line.to_owned()))
    }

    /// The commit a full ref name points at, `None` when there is no such ref.
    pub fn ref_commit(&self, name: &str) -> Result<Option<CommitId>, GitError> {
        let cmd = GitCommand::new(
            &self.git_dir_context(),
            ["rev-parse", "--verify", "--quiet", "--end-of-options"],
        )
        .arg(format!("{name}^{{commit}}"))
        .read_only();
        match cmd.run() {
            Ok(out) => {
                let line = one_line(&cmd.display_args(), &out.stdout)?;
                CommitId::parse(&line).map(Some).ok_or_else(|| {
                    GitError::new(&cmd.display_args(), GitErrorKind::UnexpectedOutput(line))
                })
            }
            Err(GitError {
                kind: GitErrorKind::Failed { code: Some(1), .. },
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Clones ref `full_ref` of this repository, its last `depth` commits only, into a new
    /// bare repository at `dest` (cordon's staging for a shallow bundle).
    pub fn shallow_clone(&self, dest: &Path, full_ref: &str, depth: u32) -> Result<Repo, GitError> {
        let branch = full_ref.strip_prefix("refs/heads/").unwrap_or(full_ref);
        let mut url = std::ffi::OsString::from("file://");
        url.push(self.common_dir());
        let parent = dest.parent().unwrap_or(Path::new("/")).to_owned();
        GitCommand::new(
            &GitContext::Discover { dir: parent },
            [
                "clone",
                "-q",
                "--bare",
                "--no-local",
                "--single-branch",
                "--no-tags",
            ],
        )
        .arg(format!("--depth={depth}"))
        .args(["--branch", branch, "--end-of-options"])
        .arg(url)
        .arg(dest)
        .run()?;
        Ok(Repo::from_parts(dest.to_owned(), None))
    }

    /// Writes a bundle of `revs` (rev-list arguments: refs to include, `^commit` to exclude)
    /// to `out`.
    pub fn create_bundle(&self, out: &Path, revs: &[String]) -> Result<(), GitError> {
        GitCommand::new(&self.git_dir_context(), ["bundle", "create", "-q"])
            .arg(out)
            .args(revs)
            .run()
            .map(drop)
    }

    /// Asks git whether the bundle at `path` can be imported here: a bundle, with every
    /// prerequisite present and complete.
    pub fn verify_bundle(&self, path: &Path) -> Result<(), GitError> {
        GitCommand::new(&self.git_dir_context(), ["bundle", "verify", "-q"])
            .arg(path)
            .read_only()
            .run()
            .map(drop)
    }

    /// Fetches `refspec` (`src:dst`, `+` to force) from the bundle at `path`, checking every
    /// object received; no tags, no `FETCH_HEAD`, no submodules.
    pub fn fetch_bundle(&self, path: &Path, refspec: &str) -> Result<(), GitError> {
        self.fetch_bundle_checked(path, refspec, true)
    }

    /// [`Repo::fetch_bundle`], with the objects checked (`fsck`) only when `check_objects`:
    /// a bundle cordon made from the user's own repository for a repository of cordon's own
    /// brings nothing that is not already the user's.
    pub fn fetch_bundle_checked(
        &self,
        path: &Path,
        refspec: &str,
        check_objects: bool,
    ) -> Result<(), GitError> {
        let config: Vec<(String, String)> = FSCK_CONFIG
            .iter()
            .filter(|_| check_objects)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        GitCommand::new(
            &self.git_dir_context(),
            [
                "fetch",
                "-q",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-recurse-submodules",
                "--no-auto-gc",
                // A repository cordon just made has its HEAD on the (unborn) branch fetched.
                "--update-head-ok",
            ],
        )
        .config(&config)
        .arg(path)
        .arg(refspec)
        .run()
        .map(drop)
    }

    /// Whether `ancestor` is an ancestor of (or equal to) `descendant`.
    pub fn is_ancestor(
        &self,
        ancestor: &CommitId,
        descendant: &CommitId,
    ) -> Result<bool, GitError> {
        let cmd = GitCommand::new(
            &self.git_dir_context(),
            [
                "merge-base",
                "--is-ancestor",
                ancestor.as_str(),
                descendant.as_str(),
            ],
        )
        .read_only();
        match cmd.run() {
            Ok(_) => Ok(true),
            Err(GitError {
                kind: GitErrorKind::Failed { code: Some(1), .. },
                ..
            }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// How many commits each side has that the other lacks: `(only in a, only in b)`.
    pub fn ahead_behind(&self, a: &CommitId, b: &CommitId) -> Result<(u64, u64), GitError> {
        let cmd = GitCommand::new(
            &self.git_dir_context(),
            ["rev-list", "--left-right", "--count"],
        )
        .arg(format!("{a}...{b}"))
        .read_only();
        let out = cmd.run()?;
        let line = one_line(&cmd.display_args(), &out.stdout)?;
        let mut parts = line.split_ascii_whitespace().map(str::parse::<u64>);
        match (parts.next(), parts.next()) {
            (Some(Ok(left)), Some(Ok(right))) => Ok((left, right)),
            _ => Err(GitError::new(
                &cmd.display_args(),
                GitErrorKind::UnexpectedOutput(line),
            )),
        }
    }

    /// Sets ref `name` to `new`, only if it still points at `old` (`None`: only if it does
    /// not exist) — a compare-and-swap, so a concurrent change is never overwritten.
    pub fn update_ref(
        &self,
        name: &str,
        new: &CommitId,
        old: Option<&CommitId>,
        message: &str,
    ) -> Result<(), GitError> {
        let zero = "0".repeat(new.as_str().len());
        let old = old.map_or(zero.as_str(), CommitId::as_str);
        GitCommand::new(&self.git_dir_context(), ["update-ref", "-m", message])
            .args(["--end-of-options", name, new.as_str(), old])
            .run()
            .map(drop)
    }

    /// Sets ref `name` to `new` whatever it pointed at (for refs that are cordon's own).
    pub fn set_ref(&self, name: &str, new: &CommitId, message: &str) -> Result<(), GitError> {
        GitCommand::new(&self.git_dir_context(), ["update-ref", "-m", message])
            .args(["--end-of-options", name, new.as_str()])
            .run()
            .map(drop)
    }

    /// Deletes ref `name` (nothing when it does not exist).
    pub fn delete_ref(&self, name: &str) -> Result<(), GitError> {
        if self.ref_commit(name)?.is_none() {
            return Ok(());
        }
        GitCommand::new(
            &self.git_dir_context(),
            ["update-ref", "-d", "--end-of-options", name],
        )
        .run()
        .map(drop)
    }

    /// Fast-forwards the branch checked out in the work tree `work_tree` (the main checkout,
    /// whose git directory is the common one) to `commit` with `git merge --ff-only`: git
    /// refuses when local changes would be overwritten, and then nothing changes.
    pub fn merge_ff_only(&self, work_tree: &Path, commit: &CommitId) -> Result<(), GitError> {
        let context = GitContext::WorkTree {
            git_dir: self.common_dir().to_owned(),
            work_tree: work_tree.to_owned(),
        };
        GitCommand::new(
            &context,
            ["merge", "--ff-only", "-q", "--no-stat", "--no-verify"],
        )
        .neutralize_drivers()?
        .args(["--end-of-options", commit.as_str()])
        .run()
        .map(drop)
    }

    /// Resets the work tree and index of a repository cordon made ([`Repo::init`]) to its
    /// `HEAD`.
    pub fn checkout_head(&self) -> Result<(), GitError> {
        let work_tree = self.toplevel().unwrap_or(self.common_dir()).to_owned();
        let context = GitContext::WorkTree {
            git_dir: self.common_dir().to_owned(),
            work_tree,
        };
        GitCommand::new(&context, ["reset", "-q", "--hard", "HEAD"])
            .neutralize_drivers()?
            .run()
            .map(drop)
    }

    /// Whether `path` differs between two commits.
    pub fn path_changed(&self, a: &CommitId, b: &CommitId, path: &str) -> Result<bool, GitError> {
        let out = GitCommand::new(
            &self.git_dir_context(),
            [
                "diff",
                "--no-ext-diff",
                "--no-textconv",
                "--name-only",
                "-z",
            ],
        )
        .args([a.as_str(), b.as_str(), "--", path])
        .read_only()
        .run()?;
        Ok(split_nul(&out.stdout).next().is_some())
    }

    /// The submodule URLs `.gitmodules` declares at `commit` (none when it has no such file).
    pub fn submodule_urls(&self, commit: &CommitId) -> Result<Vec<String>, GitError> {
        let blob = format!("{commit}:.gitmodules");
        let exists = GitCommand::new(&self.git_dir_context(), ["cat-file", "-e"])
            .arg(&blob)
            .read_only()
            .run()
            .is_ok();
        if !exists {
            return Ok(Vec::new());
        }
        let cmd = GitCommand::new(&self.git_dir_context(), ["config", "-z", "--blob"])
            .arg(&blob)
            .args(["--get-regexp", r"^submodule\..*\.url$"])
            .read_only();
        let out = match cmd.run() {
            Ok(out) => out,
            Err(GitError {
                kind: GitErrorKind::Failed { code: Some(1), .. },
                ..
            }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(split_nul(&out.stdout)
            .filter_map(|entry| {
                let text = String::from_utf8_lossy(entry);
                text.split_once('\n').map(|(_, url)| url.to_owned())
            })
            .collect())
    }

    /// What checking out `to` over `from` writes into a work tree: the files (blobs and
    /// symlinks; not submodules) `to` adds or changes, their sizes added up and the largest.
    /// With `from` `None`, every file of `to`. Read from the object store (`diff-tree` and
    /// `cat-file --batch-check`): nothing is written.
    pub fn checkout_size(
        &self,
        from: Option<&CommitId>,
        to: &CommitId,
    ) -> Result<CheckoutSize, GitError> {
        let written = match from {
            Some(from) => self.changed_blobs(from, to)?,
            None => self.all_blobs(to)?,
        };
        let mut size = CheckoutSize::default();
        if written.is_empty() {
            return Ok(size);
        }
        let mut input = Vec::new();
        for (oid, _) in &written {
            input.extend_from_slice(oid.as_bytes());
            input.push(b'\n');
        }
        let cmd = GitCommand::new(
            &self.git_dir_context(),
            ["cat-file", "--batch-check=%(objectsize)"],
        )
        .read_only();
        let out = cmd.run_with_input(&input)?;
        let text = String::from_utf8_lossy(&out.stdout);
        let sizes: Vec<&str> = text.lines().collect();
        if sizes.len() != written.len() {
            return Err(GitError::new(
                &cmd.display_args(),
                GitErrorKind::UnexpectedOutput(format!(
                    "{} sizes for {} objects",
                    sizes.len(),
                    written.len()
                )),
            ));
        }
        for ((_, path), line) in written.into_iter().zip(sizes) {
            let bytes: u64 = line.parse().map_err(|_| {
                GitError::new(
                    &cmd.display_args(),
                    GitErrorKind::UnexpectedOutput(line.to_owned()),
                )
            })?;
            size.files += 1;
            size.total_bytes = size.total_bytes.saturating_add(bytes);
            if size.largest.as_ref().is_none_or(|(_, most)| bytes > *most) {
                size.largest = Some((String::from_utf8_lossy(&path).into_owned(), bytes));
            }
        }
        Ok(size)
    }

    /// The blobs `to` has that `from` lacks at the same path: `(object id, path)`.
    fn changed_blobs(
        &self,
        from: &CommitId,
        to: &CommitId,
    ) -> Result<Vec<(String, Vec<u8>)>, GitError> {
        let out = GitCommand::new(
            &self.git_dir_context(),
            [
                "diff-tree",
                "-r",
                "-z",
                "--raw",
                "--no-renames",
                "--no-ext-diff",
            ],
        )
        .args([
            "--no-textconv",
            "--end-of-options",
            from.as_str(),
            to.as_str(),
        ])
        .read_only()
        .run()?;
        let mut fields = split_nul(&out.stdout);
        let mut blobs = Vec::new();
        while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
            // `:OLDMODE NEWMODE OLDID NEWID STATUS`
            let meta = String::from_utf8_lossy(meta);
            let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
            if let [_, mode, _, oid, _] = parts.as_slice()
                && is_file_mode(mode)
            {
                blobs.push(((*oid).to_owned(), path.to_vec()));
            }
        }
        Ok(blobs)
    }

    /// Every blob of `commit`'s tree: `(object id, path)`.
    fn all_blobs(&self, commit: &CommitId) -> Result<Vec<(String, Vec<u8>)>, GitError> {
        let out = GitCommand::new(
            &self.git_dir_context(),
            ["ls-tree", "-r", "-z", "--full-tree", "--end-of-options"],
        )
        .arg(commit.as_str())
        .read_only()
        .run()?;
        Ok(split_nul(&out.stdout)
            .filter_map(|entry| {
                // `MODE TYPE ID\tPATH`
                let tab = entry.iter().position(|b| *b == b'\t')?;
                let meta = String::from_utf8_lossy(&entry[..tab]);
                let parts: Vec<&str> = meta.split(' ').collect();
                match parts.as_slice() {
                    [mode, _, oid] if is_file_mode(mode) => {
                        Some(((*oid).to_owned(), entry[tab + 1..].to_vec()))
                    }
                    _ => None,
                }
            })
            .collect())
    }

    /// Every path of `commit`'s tree, directories included (`ls-tree -r -t`), as bytes.
    pub fn tree_paths(&self, commit: &CommitId) -> Result<Vec<Vec<u8>>, GitError> {
        let out = GitCommand::new(
            &self.git_dir_context(),
            ["ls-tree", "-r", "-t", "-z", "--name-only", "--full-tree"],
        )
        .args(["--end-of-options", commit.as_str()])
        .read_only()
        .run()?;
        Ok(split_nul(&out.stdout).map(<[u8]>::to_vec).collect())
    }

    /// Counts the commits reachable from `commit`.
    pub fn commit_count(&self, commit: &CommitId) -> Result<u64, GitError> {
        let cmd = GitCommand::new(
            &self.git_dir_context(),
            ["rev-list", "--count", commit.as_str()],
        )
        .read_only();
        let out = cmd.run()?;
        let line = one_line(&cmd.display_args(), &out.stdout)?;
        line.parse()
            .map_err(|_| GitError::new(&cmd.display_args(), GitErrorKind::UnexpectedOutput(line)))
    }
}

/// What a checkout writes ([`Repo::checkout_size`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckoutSize {
    /// How many files (blobs and symlinks).
    pub files: u64,
    /// Their sizes added up, in bytes.
    pub total_bytes: u64,
    /// The largest: its path and size in bytes.
    pub largest: Option<(String, u64)>,
}

/// Whether a tree entry's mode is a file a checkout writes (regular, executable, symlink).
fn is_file_mode(mode: &str) -> bool {
    matches!(mode, "100644" | "100755" | "120000" | "100664")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut file, bytes).unwrap();
        file
    }

    #[test]
    fn headers_are_parsed_strictly() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let good = format!("# v2 git bundle\n-{b} parent\n{a} refs/heads/main\n\nPACK....");
        let header = BundleHeader::read(write(good.as_bytes()).path()).unwrap();
        assert_eq!(
            header.refs,
            vec![(CommitId::parse(&a).unwrap(), "refs/heads/main".to_owned())]
        );
        assert_eq!(header.prerequisites, vec![CommitId::parse(&b).unwrap()]);
        let v3 = format!("# v3 git bundle\n@object-format=sha1\n{a} refs/heads/x\n\nPACK");
        assert_eq!(
            BundleHeader::read(write(v3.as_bytes()).path())
                .unwrap()
                .capabilities
                .len(),
            1
        );
        for bad in [
            "not a bundle".to_owned(),
            format!("# v2 git bundle\n{a} refs/heads/main\n"),
            format!("# v2 git bundle\n{a} refs/heads/main\n\nJUNK"),
            "# v2 git bundle\nzz refs/heads/main\n\nPACK".to_owned(),
            format!("# v2 git bundle\n@object-format=sha1\n{a} r\n\nPACK"),
        ] {
            let err = BundleHeader::read(write(bad.as_bytes()).path()).unwrap_err();
            assert!(
                matches!(err.kind, GitErrorKind::BadBundle(_)),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn branch_names_follow_git() {
        for good in ["main", "feature/x", "fix-1.2"] {
            check_branch_name(good).unwrap();
        }
        for bad in [
            "",
            "-x",
            "a..b",
            "../../etc",
            "x/../y",
            "a b",
            "HEAD",
            "x.lock",
            "@{-1}",
            "a~1",
            "/x",
        ] {
            assert!(check_branch_name(bad).is_err(), "{bad}");
        }
    }
}
