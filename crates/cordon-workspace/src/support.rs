//! Whether overlay workspaces work on this host: probed once per boot (a real overlay of
//! layers in `CORDON_HOME`'s file system, mounted by the helper in a user namespace, as
//! workspaces use them) and remembered in `$CORDON_HOME/overlay-support.json`.

use serde::{Deserialize, Serialize};

use crate::workspaces::Workspaces;

/// The environment variable that picks the strategy of workspaces created without an explicit
/// one: `overlay`, `git-worktree` or `auto` (the default: overlay where this host supports
/// it).
pub const STRATEGY_ENV: &str = "CORDON_WORKSPACE_STRATEGY";

/// What the probe found, remembered for the boot it ran in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Remembered {
    boot_id: String,
    kernel: String,
    helper: String,
    /// `None`: supported; else why not.
    refused: Option<String>,
}

impl Workspaces {
    /// `Ok` when overlay workspaces can be mounted here, else why not (probed once per boot
    /// and helper; the answer is kept in `$CORDON_HOME`).
    pub fn overlay_support(&self) -> Result<(), String> {
        self.support(false)
    }

    /// [`Workspaces::overlay_support`], probed afresh (what `cordon doctor` reports).
    pub fn probe_overlay_support(&self) -> Result<(), String> {
        self.support(true)
    }

    fn support(&self, fresh: bool) -> Result<(), String> {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .unwrap_or_default()
            .trim()
            .to_owned();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_owned();
        let helper = match cordon_sandbox::helper_executable() {
            Ok(path) => path.display().to_string(),
            Err(e) => return Err(e.to_string()),
        };
        let path = self.layout().support();
        if !fresh
            && let Ok(bytes) = std::fs::read(&path)
            && let Ok(known) = serde_json::from_slice::<Remembered>(&bytes)
            && !boot_id.is_empty()
            && known.boot_id == boot_id
            && known.kernel == kernel
            && known.helper == helper
        {
            return known.refused.map_or(Ok(()), Err);
        }
        let home = self.home();
        let refused = std::fs::create_dir_all(home)
            .map_err(|e| format!("create {}: {e}", home.display()))
            .and_then(|()| cordon_sandbox::probe_trees(home))
            .err();
        let remembered = Remembered {
            boot_id,
            kernel,
            helper,
            refused: refused.clone(),
        };
        if let Ok(text) = serde_json::to_vec(&remembered) {
            let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, &path);
            }
        }
        refused.map_or(Ok(()), Err)
    }
}
