//! The workspaces of `repo.clone` jobs live under the service's data directory until nobody
//! needs them: one that no job has used for the policy's `workspace_retention` (7 days by
//! default), and that no queued or running job names, is removed by the process whose workers
//! made it. "Used" is the last of: its clone job's end, and every later job that resolved it
//! (each touches its marker). A job naming a removed workspace fails with `usage`, saying it
//! is gone.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use cordon_store::{JobFilter, JobId, JobState};

use crate::service::Service;

/// The marker a job touches when it uses the workspace at `root` (beside it, with the
/// workspace lock: `.<name>.lock`).
pub(crate) fn marker(root: &Path) -> PathBuf {
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    root.with_file_name(format!(".{name}.lock"))
}

/// Records that a job uses the workspace at `root` now.
pub(crate) fn touch(root: &Path) {
    let path = marker(root);
    if let Ok(file) = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
    {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// Starts the thread that sweeps the workspaces (at start, then every half retention, at
/// most every minute); it stops once `stop` is set.
pub(crate) fn start(service: &Arc<Service>, stop: &Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let (service, stop) = (Arc::clone(service), Arc::clone(stop));
    std::thread::Builder::new()
        .name("cordon-retention".into())
        .spawn(move || {
            let mut next = std::time::Instant::now();
            while !stop.load(Ordering::SeqCst) {
                if std::time::Instant::now() >= next {
                    let retention = service.policy().workspace_retention();
                    for (id, path) in sweep(&service, retention) {
                        eprintln!(
                            "cordon: removed the workspace of job {id} ({}): unused for {}",
                            path.display(),
                            humantime::format_duration(retention)
                        );
                    }
                    next = std::time::Instant::now()
                        + (retention / 2)
                            .clamp(Duration::from_millis(500), Duration::from_secs(60));
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        })
        .expect("the retention thread starts")
}

/// Removes the workspaces unused for `retention` that no unfinished job names; returns
/// which.
pub(crate) fn sweep(service: &Service, retention: Duration) -> Vec<(JobId, PathBuf)> {
    let dir = service.data_dir.join("workspaces");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let now = SystemTime::now();
    // The workspaces queued and running jobs name: through the job that made them or
    // through any later job whose result names them (an applyPatch's workspace is its
    // clone's).
    let mut in_use: Vec<PathBuf> = Vec::new();
    for state in [JobState::Queued, JobState::Running] {
        let filter = JobFilter {
            state: Some(state),
            limit: u32::MAX,
            ..JobFilter::default()
        };
        let Ok(jobs) = service.store.list_jobs(&filter) else {
            // Not knowing what is in use, remove nothing.
            return Vec::new();
        };
        for job in jobs {
            let from = ["workspace", "session"].iter().filter_map(|k| {
                job.inputs
                    .get(k)?
                    .get("from_job")?
                    .as_str()?
                    .parse::<JobId>()
                    .ok()
            });
            for id in from {
                in_use.push(dir.join(id.as_str()));
                if let Ok(Some(earlier)) = service.store.get_job(&id)
                    && let Some(path) = earlier
                        .result
                        .as_ref()
                        .and_then(|r| r.get("workspace"))
                        .and_then(|w| w.as_str())
                {
                    in_use.push(PathBuf::from(path));
                }
            }
        }
    }
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(id) = name.parse::<JobId>() else {
            continue;
        };
        if !path.is_dir() || in_use.contains(&path) {
            continue;
        }
        let Ok(Some(job)) = service.store.get_job(&id) else {
            continue;
        };
        if !job.state.is_final() {
            continue;
        }
        let ended = job.finished_at_ms.map_or(SystemTime::UNIX_EPOCH, |ms| {
            SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
        });
        let used = std::fs::metadata(marker(&path))
            .and_then(|m| m.modified())
            .map_or(ended, |t| t.max(ended));
        if now.duration_since(used).unwrap_or_default() < retention {
            continue;
        }
        // Never while a job holds it.
        let Ok(lock) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(marker(&path))
        else {
            continue;
        };
        if lock.try_lock().is_err() {
            continue;
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            let _ = std::fs::remove_file(marker(&path));
            removed.push((id, path));
        }
    }
    removed
}
