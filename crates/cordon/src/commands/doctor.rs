//! `cordon doctor`: what this host can enforce, and what `cordon run` will therefore enforce.

use crate::stdout::{out, outln};
use std::fmt::Write as _;

use clap::Args;
use cordon_sandbox::{Check, DoctorReport};

use crate::exit::{CliError, Exit};

/// Arguments of `cordon doctor`.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Print the report as one JSON document (cordon.doctor/v1).
    #[arg(long)]
    pub json: bool,
}

/// Probes the host and prints the report. Exit 0 when the default policy can be enforced,
/// 1 otherwise.
pub fn run(args: &DoctorArgs) -> Result<Exit, CliError> {
    let mut report = cordon_sandbox::doctor();
    report.workspaces = Some(workspaces_report());
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        out!("{}", render(&report))?;
    }
    Ok(if report.default_policy_ok {
        Exit::Success
    } else {
        Exit::Failed
    })
}

/// How workspaces are made here: overlay when a real overlay of layers in `CORDON_HOME`
/// mounts, else git worktrees (with the reason).
fn workspaces_report() -> cordon_sandbox::WorkspacesReport {
    let probed = cordon_workspace::Workspaces::from_env()
        .map_err(|e| e.to_string())
        .and_then(|w| w.probe_overlay_support());
    let strategy = match std::env::var(cordon_workspace::STRATEGY_ENV).as_deref() {
        Ok("git-worktree") => "git-worktree (CORDON_WORKSPACE_STRATEGY)".to_owned(),
        Ok("overlay") => "overlay (CORDON_WORKSPACE_STRATEGY)".to_owned(),
        _ if probed.is_ok() => "overlay".to_owned(),
        _ => "git-worktree".to_owned(),
    };
    let overlay = match probed {
        Ok(()) => Check {
            ok: true,
            detail: "overlay workspaces mount here: created in constant time over shared base trees, warm build caches".into(),
            hint: None,
        },
        Err(why) => Check {
            ok: false,
            detail: format!("overlay workspaces cannot be mounted here: {why}"),
            hint: Some(
                "workspaces are git worktrees instead (full checkouts, cold builds); overlays need Linux 5.11+ with unprivileged overlayfs and CORDON_HOME on a file system with user extended attributes (ext4, xfs, btrfs, tmpfs)".into(),
            ),
        },
    };
    cordon_sandbox::WorkspacesReport { strategy, overlay }
}

fn line(out: &mut String, name: &str, check: &Check) {
    let mark = if check.ok { "✓" } else { "✗" };
    let _ = writeln!(out, "  {mark} {name:<22} {}", check.detail);
    if let Some(hint) = &check.hint {
        let _ = writeln!(out, "    {:<22} hint: {hint}", "");
    }
}

fn enforcement_name(e: cordon_types::Enforcement) -> String {
    serde_json::to_value(e)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The human-readable report.
pub fn render(r: &DoctorReport) -> String {
    let mut out = String::from("cordon doctor: what this host can enforce\n\n");
    line(&mut out, "user namespaces", &r.user_namespaces);
    line(&mut out, "landlock", &r.landlock);
    line(&mut out, "seccomp", &r.seccomp);
    line(&mut out, "mount_setattr", &r.mount_setattr);
    line(&mut out, "cgroup limits", &r.cgroup.limits);
    line(&mut out, "overlayfs in userns", &r.overlayfs_userns);
    if let Some(w) = &r.workspaces {
        line(&mut out, "overlay workspaces", &w.overlay);
        let _ = writeln!(out, "    {:<22} workspaces are made as: {}", "", w.strategy);
    }
    let bwrap = Check {
        ok: r.bwrap_free,
        detail: "no bubblewrap, setuid helper or daemon needed".into(),
        hint: None,
    };
    line(&mut out, "bwrap-free", &bwrap);
    line(&mut out, "sandbox helper", &r.helper);
    line(&mut out, "landlock tier", &r.landlock_tier);
    let c = &r.cgroup;
    let _ = writeln!(
        out,
        "\n  cgroup v2: {} (controllers: {}; delegated: {})",
        c.v2_mount.as_deref().unwrap_or("not mounted"),
        if c.v2_controllers.is_empty() {
            "none".to_string()
        } else {
            c.v2_controllers.join(" ")
        },
        if c.v2_delegated.is_empty() {
            "none".to_string()
        } else {
            c.v2_delegated.join(" ")
        },
    );
    let _ = writeln!(
        out,
        "  cgroup v1: memory {}, pids {}",
        c.v1_memory.as_deref().unwrap_or("unavailable"),
        c.v1_pids.as_deref().unwrap_or("unavailable"),
    );
    if c.limits.ok && !c.favordynmods {
        let _ = writeln!(
            out,
            "  cgroup moves: no hierarchy is mounted with favordynmods, so the first run with \
             --memory or --pids after a quiet moment waits for the kernel (10-20 ms measured); \
             `mount -o remount,favordynmods {}` removes that wait (Linux 6.0 or later, or \
             boot with cgroup_favordynmods=true; docs/operations.md)",
            c.v2_mount.as_deref().unwrap_or("/sys/fs/cgroup"),
        );
    }
    let e = &r.enforce;
    let _ = writeln!(out, "\ncordon run will enforce:");
    let _ = writeln!(
        out,
        "  tier:        {}{}",
        r.tier.name(),
        if r.inside_cordon_sandbox {
            " (inside a cordon sandbox, which refuses new namespaces)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  namespaces:  {}",
        if e.namespaces.is_empty() {
            "none".to_owned()
        } else {
            e.namespaces.join(", ")
        }
    );
    let _ = writeln!(
        out,
        "  landlock:    {}",
        e.landlock_abi.map_or(
            "none (needs --allow-degraded landlock)".to_string(),
            |a| format!("ABI {a}")
        )
    );
    let _ = writeln!(
        out,
        "  seccomp:     {}",
        if e.seccomp {
            "filter installed"
        } else {
            "none (needs --allow-degraded seccomp)"
        }
    );
    let _ = writeln!(out, "  --memory:    {}", enforcement_name(e.memory));
    let _ = writeln!(out, "  --pids:      {}", enforcement_name(e.pids));
    let _ = writeln!(out, "  --cpu-time:  {}", enforcement_name(e.cpu));
    let _ = writeln!(
        out,
        "\n{}",
        if r.default_policy_ok {
            "ok: the default sandbox policy can be enforced on this host"
        } else {
            "not ok: `cordon run` will refuse to run sandboxed until the ✗ items above are fixed (or use --no-sandbox)"
        }
    );
    out
}
