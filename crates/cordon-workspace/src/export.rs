//! [`Workspaces::export`]: a plain copy of a workspace's files in a directory of the host.

use std::path::Path;
use std::process::Command;

use crate::error::{WorkspaceError, WorkspaceErrorKind};
use crate::id::WorkspaceId;
use crate::record::{self, Strategy};
use crate::workspaces::Workspaces;

impl Workspaces {
    /// Copies the files of workspace `id` — its tree as its programs see it, without its
    /// `.git` — into `dir`, which must be an empty directory outside cordon's home.
    ///
    /// An overlay's tree is read through cordon's helper, which mounts it read-only in a
    /// private namespace (the host mounts nothing); a git worktree's is its checkout. The copy
    /// is `cp -a`: symbolic links are copied as links, never followed, so nothing the tree's
    /// programs wrote can make the copy write outside `dir`. Refused while a writer has the
    /// overlay mounted ([`WorkspaceErrorKind::InUse`]).
    pub fn export(&self, id: &WorkspaceId, dir: &Path) -> Result<(), WorkspaceError> {
        let (record, _lock) = self.lock_ready(id)?;
        self.check_location(&record)?;
        let _mounted = self.mount_guard(&record, false)?;
        let mut copy = match self.overlay_parts(&record)? {
            Some(parts) => {
                let launcher = crate::strategy::overlay_launcher(&parts, false)?;
                let mut cmd = Command::new(&launcher.program);
                cmd.args(&launcher.args).arg("cp");
                cmd.envs(launcher.env.iter().map(|(k, v)| (k, v)));
                cmd
            }
            None if record.strategy == Strategy::GitWorktree => Command::new("cp"),
            None => {
                return Err(WorkspaceError::new(WorkspaceErrorKind::NotReady(
                    record.state,
                )));
            }
        };
        copy.arg("-a")
            .arg("--")
            .arg(record.path.join("."))
            .arg(dir)
            .stdin(std::process::Stdio::null());
        let out = copy
            .output()
            .map_err(|e| WorkspaceError::io(dir, e).with_id(id))?;
        if !out.status.success() {
            return Err(WorkspaceError::io(
                dir,
                std::io::Error::other(format!(
                    "cp -a failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim_end()
                )),
            )
            .with_id(id));
        }
        // The `.git` at the top names cordon's git directory of the workspace: not the
        // workspace's content.
        let dot_git = dir.join(".git");
        match std::fs::symlink_metadata(&dot_git) {
            Ok(meta) if meta.is_dir() => crate::strategy::remove_dir_all(&dot_git)?,
            Ok(_) => std::fs::remove_file(&dot_git).map_err(|e| WorkspaceError::io(&dot_git, e))?,
            Err(_) => {}
        }
        record::touch(&self.layout().record(id));
        Ok(())
    }
}
