//! `push` into an existing session: the host branch's new commits, as a verified bundle,
//! imported in the session's sandbox as a fast-forward.

use std::path::PathBuf;
use std::time::Duration;

use cordon_git::Repo;
use cordon_workspace::ProcessIdentity;

use crate::error::{SessionError, SessionErrorKind};
use crate::record::{self, WriterActivity, WriterInfo};
use crate::reports::{PushReport, PushReportTag};
use crate::sandboxed::{IMPORT_SCRIPT, SandboxedGit};
use crate::sessions::{DEFAULT_MAX_BUNDLE_BYTES, Session, check_bundle_file, refused};

/// What to push into an existing session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRequest {
    /// The host repository (default: the session's).
    pub repo: Option<PathBuf>,
    /// The host branch (default: the one the session started from).
    pub branch: Option<String>,
    /// How long to wait for a writer in the session.
    pub wait: Duration,
    /// The largest bundle accepted.
    pub max_bundle_bytes: u64,
}

impl Default for PushRequest {
    fn default() -> Self {
        PushRequest {
            repo: None,
            branch: None,
            wait: Duration::ZERO,
            max_bundle_bytes: DEFAULT_MAX_BUNDLE_BYTES,
        }
    }
}

impl Session {
    /// Bundles the host branch's commits the session lacks (`^base`), checks the bundle,
    /// and imports it into the session's branch inside the session's sandbox, as a
    /// fast-forward only. Holds the writer lock throughout.
    pub fn push(&self, request: &PushRequest) -> Result<PushReport, SessionError> {
        self.push_or_stop(request, &|| false)
    }

    /// Like [`Session::push`], and the wait for the session's writer ends as soon as `stop`
    /// says so (the caller's cancel): [`SessionErrorKind::WaitCancelled`].
    pub fn push_or_stop(
        &self,
        request: &PushRequest,
        stop: &dyn Fn() -> bool,
    ) -> Result<PushReport, SessionError> {
        let rec = self.active_record()?;
        self.check_home_masked()?;
        let host = Repo::open(request.repo.as_deref().unwrap_or(&rec.repo))?;
        let branch = request
            .branch
            .clone()
            .unwrap_or_else(|| rec.host_branch.clone());
        cordon_git::check_branch_name(&branch)?;
        let full = format!("refs/heads/{branch}");
        let commit = host
            .ref_commit(&full)?
            .ok_or_else(|| SessionError::new(SessionErrorKind::NotABranch(branch.clone())))?;
        let _writer = self.writer_lock_or_stop(request.wait, stop)?;
        let me = ProcessIdentity::current();
        self.update(|r| {
            r.writer = Some(WriterInfo {
                pid: me.pid,
                start_time: me.start_time,
                activity: WriterActivity::Push,
                since: record::now_text(),
            })
        })?;
        let result = self.push_locked(&host, &full, &commit, &rec, request);
        let rec = self.update(|r| {
            r.writer = None;
            r.last_activity = record::now_text();
            if let Ok(Some(_)) = result {
                r.base_commit = commit.clone();
            }
        })?;
        let bytes = result?;
        Ok(PushReport {
            schema: PushReportTag,
            session: rec,
            created: false,
            commit,
            bundle_bytes: bytes.unwrap_or(0),
        })
    }

    /// Returns the size of the bundle imported (`None`: nothing was new).
    fn push_locked(
        &self,
        host: &Repo,
        full: &str,
        commit: &cordon_git::CommitId,
        rec: &crate::record::SessionRecord,
        request: &PushRequest,
    ) -> Result<Option<u64>, SessionError> {
        if host.ref_commit(rec.base_commit.as_str())?.is_some()
            && host.is_ancestor(commit, &rec.base_commit)?
        {
            return Ok(None);
        }
        if !host.is_ancestor(&rec.base_commit, commit)? {
            return Err(SessionError::new(SessionErrorKind::BundleRefused(format!(
                "{full} at {commit} does not descend from the session's base {}: a history rewrite is not pushed",
                rec.base_commit
            ))));
        }
        let transfer = self.sessions.layout.transfer(&self.id, "push");
        std::fs::create_dir(&transfer).map_err(|e| SessionError::io(&transfer, e))?;
        let result = (|| {
            let bundle = transfer.join("push.bundle");
            host.create_bundle(&bundle, &[full.to_owned(), format!("^{}", rec.base_commit)])?;
            check_bundle_file(&bundle, full, Some(commit), request.max_bundle_bytes)?;
            let size = bundle
                .metadata()
                .map_err(|e| SessionError::io(&bundle, e))?
                .len();
            host.verify_bundle(&bundle)
                .map_err(|e| refused(format!("git bundle verify: {e}")))?;
            SandboxedGit {
                step: "importing the bundle",
                root: &rec.path,
                read_only: false,
                read_only_binds: vec![transfer.clone()],
                overlay: self.overlay(rec)?,
                script: IMPORT_SCRIPT,
                args: vec![
                    bundle.to_string_lossy().into_owned(),
                    full.to_owned(),
                    rec.branch.clone(),
                ],
            }
            .run()
            .map(|_| Some(size))
        })();
        let _ = cordon_workspace::remove_tree(&transfer);
        result
    }
}
