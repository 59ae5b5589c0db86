//! `pull`: the session's branch back into the host repository, as a fast-forward only.

use std::path::PathBuf;
use std::time::Duration;

use cordon_git::{CommitId, Repo};
use cordon_workspace::ProcessIdentity;

use crate::error::{SessionError, SessionErrorKind};
use crate::record::{self, KeptCommits, SessionRecord, SessionStatus, WriterActivity, WriterInfo};
use crate::reports::{PullOutcome, PullReport, PullReportTag};
use crate::sandboxed::{EXPORT_SCRIPT, SandboxedGit};
use crate::sessions::{DEFAULT_MAX_BUNDLE_BYTES, Session, check_bundle_file, refused};

/// The default bound of a pull's wait for the session's writer: 10 minutes.
pub const DEFAULT_PULL_WAIT: Duration = Duration::from_secs(600);

/// The default bound of what a pull writes into the checkout, all files together: 1 GiB.
pub const DEFAULT_MAX_CHECKOUT_BYTES: u64 = 1 << 30;

/// The default bound of the largest file a pull writes into the checkout: 100 MiB.
pub const DEFAULT_MAX_CHECKOUT_FILE_BYTES: u64 = 100 << 20;

/// What to pull, and where to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// The host repository (default: the session's).
    pub repo: Option<PathBuf>,
    /// The host branch to fast-forward (default: the branch the session started from).
    pub into: Option<String>,
    /// How long to wait for a writer in the session to finish.
    pub wait: Duration,
    /// The largest bundle accepted.
    pub max_bundle_bytes: u64,
    /// The most bytes the change may write into the checkout: the files it adds or changes,
    /// added up (a bundle compresses: 1 GiB of zeros is a 1 MiB pack).
    pub max_checkout_bytes: u64,
    /// The largest file the change may write into the checkout.
    pub max_checkout_file_bytes: u64,
}

impl Default for PullRequest {
    fn default() -> Self {
        PullRequest {
            repo: None,
            into: None,
            wait: DEFAULT_PULL_WAIT,
            max_bundle_bytes: DEFAULT_MAX_BUNDLE_BYTES,
            max_checkout_bytes: DEFAULT_MAX_CHECKOUT_BYTES,
            max_checkout_file_bytes: DEFAULT_MAX_CHECKOUT_FILE_BYTES,
        }
    }
}

impl Session {
    /// Waits (at most `wait`) until no writer runs, then bundles the session's branch in the
    /// session's sandbox (cordon runs git there; no file the agent wrote is taken), checks
    /// the bundle (one ref, the session's branch; size; `git bundle verify` against the host,
    /// prerequisites present), fetches it into `refs/cordon/sessions/<id>` with every object
    /// checked, and fast-forwards the host branch: `git merge --ff-only` when it is checked
    /// out in the main checkout, a compare-and-swap of the ref otherwise. A branch that moved
    /// on ([`SessionErrorKind::Diverged`]) or a refusal leaves the host branch, index and
    /// work tree as they were.
    pub fn pull(&self, request: &PullRequest) -> Result<PullReport, SessionError> {
        self.pull_or_stop(request, &|| false)
    }

    /// Like [`Session::pull`], and the wait for the session's writer ends as soon as `stop`
    /// says so (the caller's cancel): [`SessionErrorKind::WaitCancelled`].
    pub fn pull_or_stop(
        &self,
        request: &PullRequest,
        stop: &dyn Fn() -> bool,
    ) -> Result<PullReport, SessionError> {
        let rec = self.record()?;
        if rec.state == SessionStatus::Ended {
            return self
                .pull_kept(&rec, request)
                .map_err(|e| e.with_id(&self.id));
        }
        let rec = self.active_record()?;
        self.check_home_masked()?;
        let host = Repo::open(request.repo.as_deref().unwrap_or(&rec.repo))?;
        let into = request
            .into
            .clone()
            .unwrap_or_else(|| rec.host_branch.clone());
        cordon_git::check_branch_name(&into)?;
        let _writer = self.writer_lock_or_stop(request.wait, stop)?;
        let me = ProcessIdentity::current();
        self.update(|r| {
            r.writer = Some(WriterInfo {
                pid: me.pid,
                start_time: me.start_time,
                activity: WriterActivity::Pull,
                since: record::now_text(),
            })
        })?;
        let result = self.pull_locked(&host, &into, &rec, request);
        self.update(|r| {
            r.writer = None;
            r.last_activity = record::now_text();
            if let Ok(report) = &result
                && report.outcome == PullOutcome::Merged
                && let Some(to) = &report.to
                && r.base_commit == rec.base_commit
            {
                r.base_commit = to.clone();
            }
        })?;
        result.map_err(|e| e.with_id(&self.id))
    }

    fn pull_locked(
        &self,
        host: &Repo,
        into: &str,
        rec: &SessionRecord,
        request: &PullRequest,
    ) -> Result<PullReport, SessionError> {
        let into_ref = format!("refs/heads/{into}");
        let old = host.ref_commit(&into_ref)?;
        let report = PullReport {
            schema: PullReportTag,
            id: self.id.clone(),
            outcome: PullOutcome::UpToDate,
            into: into.to_owned(),
            from: old.clone(),
            to: old.clone(),
            commits: 0,
            session_ref: None,
            checked_out: false,
        };
        let transfer = self.sessions.layout.transfer(&self.id, "pull");
        std::fs::create_dir(&transfer).map_err(|e| SessionError::io(&transfer, e))?;
        let fetched = self.fetch_session_branch(host, rec, &transfer, request);
        let _ = cordon_workspace::remove_tree(&transfer);
        let session_ref = self.id.host_ref();
        let new = match fetched? {
            Some(new) => new,
            // The session's branch is still at the base, which the host has (unless it lost
            // it: then there is nothing to bring).
            None => match host.ref_commit(rec.base_commit.as_str())? {
                Some(base) => {
                    host.set_ref(&session_ref, &base, &format!("cordon session {}", self.id))?;
                    base
                }
                None => return Ok(report),
            },
        };
        self.fast_forward(host, into, &rec.base_commit, new, request, report)
    }

    /// The pull of an ended session: its kept commits (`refs/cordon/sessions/<id>`, already
    /// in the host repository) fast-forward the host branch as a live session's would.
    fn pull_kept(
        &self,
        rec: &SessionRecord,
        request: &PullRequest,
    ) -> Result<PullReport, SessionError> {
        let Some(kept) = &rec.kept else {
            return Err(SessionError::new(SessionErrorKind::Ended));
        };
        let host = Repo::open(request.repo.as_deref().unwrap_or(&rec.repo))?;
        let into = request
            .into
            .clone()
            .unwrap_or_else(|| rec.host_branch.clone());
        cordon_git::check_branch_name(&into)?;
        // The ref names the commits; a ref deleted by hand leaves the objects until git's gc.
        let new = match host.ref_commit(&kept.session_ref)? {
            Some(at) if at == kept.commit => at,
            _ => match host.ref_commit(kept.commit.as_str())? {
                Some(commit) => {
                    host.set_ref(
                        &kept.session_ref,
                        &commit,
                        &format!("cordon session {}", self.id),
                    )?;
                    commit
                }
                None => {
                    return Err(SessionError::new(SessionErrorKind::KeptCommitsGone {
                        session_ref: kept.session_ref.clone(),
                        commit: kept.commit.clone(),
                    }));
                }
            },
        };
        let old = host.ref_commit(&format!("refs/heads/{into}"))?;
        let report = PullReport {
            schema: PullReportTag,
            id: self.id.clone(),
            outcome: PullOutcome::UpToDate,
            into: into.clone(),
            from: old.clone(),
            to: old,
            commits: 0,
            session_ref: None,
            checked_out: false,
        };
        self.fast_forward(&host, &into, &rec.base_commit, new, request, report)
    }

    /// Keeps the session's commits its host branch lacks in the host repository, in
    /// `refs/cordon/sessions/<id>` (bundled in the session's sandbox and checked as a pull's
    /// are), before the session's tree goes: what was kept, `None` when nothing was unpulled
    /// (or the host repository is gone, so there is nowhere to keep them).
    pub(crate) fn keep_unpulled(&self) -> Result<Option<KeptCommits>, SessionError> {
        let rec = self.record()?;
        if rec.state != SessionStatus::Active {
            return Ok(None);
        }
        let Ok(host) = Repo::open(&rec.repo) else {
            return Ok(None);
        };
        self.check_home_masked()?;
        let transfer = self.sessions.layout.transfer(&self.id, "keep");
        std::fs::create_dir(&transfer).map_err(|e| SessionError::io(&transfer, e))?;
        let fetched = self.fetch_session_branch(&host, &rec, &transfer, &PullRequest::default());
        let _ = cordon_workspace::remove_tree(&transfer);
        let Some(tip) = fetched? else {
            return Ok(None);
        };
        let commits = match host.ref_commit(&format!("refs/heads/{}", rec.host_branch))? {
            Some(head) if head == tip || host.is_ancestor(&tip, &head)? => return Ok(None),
            Some(head) => host.ahead_behind(&head, &tip)?.1,
            None => host.commit_count(&tip)?,
        };
        Ok(Some(KeptCommits {
            session_ref: self.id.host_ref(),
            commit: tip,
            commits,
            branch: rec.host_branch.clone(),
        }))
    }

    /// Fast-forwards the host branch `into` (at `report.from`) to `new`, the session's
    /// commits in `refs/cordon/sessions/<id>`; `base` is where the session started; `request` bounds
    /// what the pull may write into the checkout.
    fn fast_forward(
        &self,
        host: &Repo,
        into: &str,
        base: &CommitId,
        new: CommitId,
        request: &PullRequest,
        mut report: PullReport,
    ) -> Result<PullReport, SessionError> {
        let into_ref = format!("refs/heads/{into}");
        let session_ref = self.id.host_ref();
        let old = report.from.clone();
        report.session_ref = Some(session_ref.clone());
        let Some(old) = old else {
            self.check_submodules(host, &session_ref, Some(base), &new)?;
            let base = host.ref_commit(base.as_str())?;
            self.check_checkout_size(host, &session_ref, base.as_ref(), &new, request)?;
            host.update_ref(
                &into_ref,
                &new,
                None,
                &format!("cordon session {} pull", self.id),
            )?;
            report.outcome = PullOutcome::Merged;
            report.commits = host.commit_count(&new)?;
            report.to = Some(new);
            return Ok(report);
        };
        if old == new || host.is_ancestor(&new, &old)? {
            return Ok(report);
        }
        if !host.is_ancestor(&old, &new)? {
            let (host_only, session_only) = host.ahead_behind(&old, &new)?;
            return Err(SessionError::new(SessionErrorKind::Diverged {
                branch: into.to_owned(),
                host_only,
                session_only,
                session_ref,
            }));
        }
        self.check_submodules(host, &session_ref, Some(&old), &new)?;
        self.check_checkout_size(host, &session_ref, Some(&old), &new, request)?;
        let (_, commits) = host.ahead_behind(&old, &new)?;
        let checked_out = host
            .list_worktrees()?
            .into_iter()
            .enumerate()
            .find(|(_, w)| w.branch.as_deref() == Some(into_ref.as_str()));
        match checked_out {
            Some((0, main)) if !main.bare => {
                host.merge_ff_only(&main.path, &new).map_err(|e| {
                    let message = match &e.kind {
                        cordon_git::GitErrorKind::Failed { stderr, .. } => stderr.trim().to_owned(),
                        _ => e.to_string(),
                    };
                    SessionError::new(SessionErrorKind::DirtyCheckout {
                        branch: into.to_owned(),
                        message,
                    })
                })?;
                report.checked_out = true;
            }
            Some((_, other)) if !other.bare => {
                return Err(SessionError::new(SessionErrorKind::CheckedOutElsewhere {
                    branch: into.to_owned(),
                    worktree: other.path,
                }));
            }
            _ => host.update_ref(
                &into_ref,
                &new,
                Some(&old),
                &format!("cordon session {} pull", self.id),
            )?,
        }
        report.outcome = PullOutcome::Merged;
        report.commits = commits;
        report.to = Some(new);
        Ok(report)
    }

    /// Bundles the session's branch in its sandbox and fetches it into the host's
    /// `refs/cordon/sessions/<id>`; `None` when the branch is still at the base.
    fn fetch_session_branch(
        &self,
        host: &Repo,
        rec: &SessionRecord,
        transfer: &std::path::Path,
        request: &PullRequest,
    ) -> Result<Option<CommitId>, SessionError> {
        let (bundle, out) = match self.git_dir(rec) {
            // Only the session's git data is needed (an overlay session's is in its upper
            // layer).
            Some(git_dir) => {
                let bundle = transfer.join("session.bundle");
                let out = SandboxedGit {
                    step: "bundling the session's branch",
                    root: transfer,
                    read_only: false,
                    read_only_binds: vec![git_dir.clone()],
                    overlay: None,
                    script: EXPORT_SCRIPT,
                    args: vec![
                        git_dir.to_string_lossy().into_owned(),
                        rec.branch.clone(),
                        rec.base_commit.to_string(),
                        bundle.to_string_lossy().into_owned(),
                    ],
                }
                .run()?;
                (bundle, out)
            }
            // A forked session's git data is spread over its layers: its whole tree, read
            // only, under a throw-away layer of the transfer's that takes the bundle.
            None => self.export_through_layers(rec, transfer)?,
        };
        let line = out.trim();
        if line == "same" {
            return Ok(None);
        }
        let tip = CommitId::parse(line).ok_or_else(|| {
            SessionError::new(SessionErrorKind::SandboxedGit {
                step: "bundling the session's branch",
                detail: format!("unexpected output {line:?}"),
            })
        })?;
        let branch_ref = format!("refs/heads/{}", rec.branch);
        check_bundle_file(&bundle, &branch_ref, Some(&tip), request.max_bundle_bytes)?;
        import_into_host(host, &bundle, &branch_ref, &self.id.host_ref())?;
        Ok(Some(tip))
    }

    /// Runs [`EXPORT_SCRIPT`] over the session's whole tree (its layers read-only, under a
    /// scratch upper layer in `transfer`); the bundle's host path and the script's output.
    fn export_through_layers(
        &self,
        rec: &SessionRecord,
        transfer: &std::path::Path,
    ) -> Result<(std::path::PathBuf, String), SessionError> {
        let Some(session) = self.overlay(rec)? else {
            return Err(SessionError::io(
                &rec.path,
                std::io::Error::other("the session has no layers"),
            ));
        };
        let root = transfer.join("tree");
        let scratch = transfer.join("layer");
        for dir in [&root, &scratch] {
            std::fs::create_dir(dir).map_err(|e| SessionError::io(dir, e))?;
        }
        let mut lowers = vec![session.layer.join("upper")];
        lowers.extend(session.lowers);
        let inside = std::path::Path::new(cordon_sandbox::SANDBOX_WORKSPACE);
        let name = ".cordon-session.bundle";
        let out = SandboxedGit {
            step: "bundling the session's branch",
            root: &root,
            read_only: false,
            read_only_binds: Vec::new(),
            overlay: Some(cordon_runner::OverlayMount {
                lowers,
                layer: scratch.clone(),
                git_dir: None,
                dot_git: None,
                caches: Vec::new(),
            }),
            script: EXPORT_SCRIPT,
            args: vec![
                inside.join(".git").to_string_lossy().into_owned(),
                rec.branch.clone(),
                rec.base_commit.to_string(),
                inside.join(name).to_string_lossy().into_owned(),
            ],
        }
        .run()?;
        Ok((scratch.join("upper").join(name), out))
    }

    /// Refuses a pull after which a submodule URL of `.gitmodules` would not go to a host
    /// over the network ([`not_network`]) — when `.gitmodules` changed, or when the change
    /// made a URL local that was not (a file named like it appeared in the tree). The
    /// session's ref is deleted again (nothing of the session stays on the host).
    fn check_submodules(
        &self,
        host: &Repo,
        session_ref: &str,
        old: Option<&CommitId>,
        new: &CommitId,
    ) -> Result<(), SessionError> {
        let urls = host.submodule_urls(new)?;
        if urls.is_empty() {
            return Ok(());
        }
        let changed = match old {
            Some(old) => host.path_changed(old, new, ".gitmodules")?,
            None => true,
        };
        let new_paths = host.tree_paths(new)?;
        let old_paths = match old {
            Some(old) if !changed => Some(host.tree_paths(old)?),
            _ => None,
        };
        for url in urls {
            let Some(reason) = not_network(&url, &new_paths) else {
                continue;
            };
            // The host's own URL, unchanged, in a tree the session did not make it local in.
            if let Some(old_paths) = &old_paths
                && not_network(&url, old_paths).is_some()
            {
                continue;
            }
            let _ = host.delete_ref(session_ref);
            return Err(SessionError::new(SessionErrorKind::LocalSubmodule {
                url,
                reason,
            }));
        }
        Ok(())
    }
}

impl Session {
    /// Refuses a change whose files would write more into the checkout than the request
    /// allows (all of them together, or the largest one), before anything is written: sizes
    /// read from the objects the pull fetched, over `from` (the branch's tip; `None`: every
    /// file counts). The session's ref is deleted again.
    fn check_checkout_size(
        &self,
        host: &Repo,
        session_ref: &str,
        from: Option<&CommitId>,
        to: &CommitId,
        request: &PullRequest,
    ) -> Result<(), SessionError> {
        let size = host.checkout_size(from, to)?;
        let refusal = match &size.largest {
            Some((path, bytes)) if *bytes > request.max_checkout_file_bytes => {
                Some(SessionErrorKind::CheckoutTooLarge {
                    file: Some(path.clone()),
                    bytes: *bytes,
                    limit: request.max_checkout_file_bytes,
                })
            }
            _ if size.total_bytes > request.max_checkout_bytes => {
                Some(SessionErrorKind::CheckoutTooLarge {
                    file: None,
                    bytes: size.total_bytes,
                    limit: request.max_checkout_bytes,
                })
            }
            _ => None,
        };
        match refusal {
            Some(kind) => {
                let _ = host.delete_ref(session_ref);
                Err(SessionError::new(kind))
            }
            None => Ok(()),
        }
    }
}

/// Why git would not take submodule URL `url` to a host over the network, in a checkout of
/// the tree whose paths are `paths`: a path of this machine, a `file:` URL, a remote helper
/// program (`ext::`, `fd::`, `file::`, an unknown scheme), a malformed URL, or a network URL
/// that a file of the tree turns local (`git clone` tries the URL as a relative path first:
/// a directory or symlink `https:` makes `https://host/x` a local path). `None` when it
/// would.
fn not_network(url: &str, paths: &[Vec<u8>]) -> Option<String> {
    match cordon_git::classify_url(url) {
        cordon_git::UrlKind::Remote { path_head, .. } => {
            let head = path_head.as_bytes();
            paths
                .iter()
                .find(|path| {
                    let name = path.rsplit(|b| *b == b'/').next().unwrap_or(path);
                    name.starts_with(head)
                })
                .map(|path| {
                    format!(
                        "the tree has {:?}, which git would clone instead (it tries a URL as a \
                         local path first)",
                        String::from_utf8_lossy(path)
                    )
                })
        }
        cordon_git::UrlKind::Local => Some("git reads it as a path of this machine".to_owned()),
        cordon_git::UrlKind::Helper { name } => Some(format!(
            "git would run the remote helper program git-remote-{name}"
        )),
        cordon_git::UrlKind::Invalid { reason } => Some(reason),
    }
}

/// Verifies a bundle against the host repository (a bundle, every prerequisite present) and
/// fetches its `src_ref` into `dst_ref` (forced: `dst_ref` is cordon's own), with every object
/// checked. Any refusal leaves the host's branches untouched.
pub fn import_into_host(
    host: &Repo,
    bundle: &std::path::Path,
    src_ref: &str,
    dst_ref: &str,
) -> Result<(), SessionError> {
    host.verify_bundle(bundle)
        .map_err(|e| refused(format!("git bundle verify: {}", git_message(&e))))?;
    host.fetch_bundle(bundle, &format!("+{src_ref}:{dst_ref}"))
        .map_err(|e| refused(format!("importing its objects: {}", git_message(&e))))
}

fn git_message(e: &cordon_git::GitError) -> String {
    match &e.kind {
        cordon_git::GitErrorKind::Failed { stderr, .. } => stderr.trim().to_owned(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submodule_urls_are_network_urls_unless_a_file_of_the_tree_is_named_like_them() {
        let tree: Vec<Vec<u8>> = vec![b"src".to_vec(), b"src/evil:org".to_vec()];
        for local in [
            "/etc",
            "./x",
            "../y",
            "~/z",
            "file:///a",
            "FILE://a",
            "..",
            ".git",
            "hostrepo",
            "sub/dir",
            "..\\hostrepo",
            "ext::sh -c x",
            "fd::3",
            "file::/srv/r",
            "evil:org/x.git",
        ] {
            assert!(not_network(local, &tree).is_some(), "{local}");
        }
        for remote in [
            "https://example.com/x.git",
            "git@example.com:x.git",
            "ssh://h/x",
        ] {
            assert_eq!(not_network(remote, &tree), None, "{remote}");
        }
    }
}
