//! Whether the host can do what a test needs (user namespaces, Landlock, seccomp, cgroup
//! limits, overlayfs, PostgreSQL, a browser): a test never skips silently, and never skips at
//! all where it is required to run.

use std::sync::OnceLock;

use crate::{TestDir, cordon};

/// Whether a host that cannot do what a test needs fails the test rather than skips it: in CI
/// (`CI=true` or `CI=1`) and when `CORDON_REQUIRE_SANDBOX=1` (which `scripts/test` sets).
pub fn capabilities_required() -> bool {
    let is = |name: &str, values: &[&str]| {
        std::env::var(name).is_ok_and(|v| values.contains(&v.as_str()))
    };
    is("CI", &["true", "1"]) || is("CORDON_REQUIRE_SANDBOX", &["1"])
}

/// The host lacks what the calling test needs: fails the test when capabilities are required
/// (see [`capabilities_required`]), else prints `SKIP: reason` (the caller then returns).
#[track_caller]
pub fn missing_capability(reason: &str) {
    assert!(
        !capabilities_required(),
        "{reason}\n(CI or CORDON_REQUIRE_SANDBOX=1 is set: this host must support it)"
    );
    eprintln!("SKIP: {reason}");
}

/// `cordon doctor --json`, parsed once per test process.
pub fn doctor() -> &'static serde_json::Value {
    static DOCTOR: OnceLock<serde_json::Value> = OnceLock::new();
    DOCTOR.get_or_init(|| {
        let out = cordon()
            .args(["doctor", "--json"])
            .output()
            .expect("cordon doctor runs");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "cordon doctor --json printed no report ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    })
}

/// Whether the default sandbox can run here; when not, fails or skips (see
/// [`missing_capability`]).
#[track_caller]
pub fn sandbox_available() -> bool {
    let d = doctor();
    if d["default_policy_ok"] == true {
        return true;
    }
    missing_capability(&format!(
        "`cordon doctor` says the default sandbox policy cannot be enforced here: {d}"
    ));
    false
}

/// Whether cgroup limits (memory, pids) can be enforced here; when not, fails or skips.
#[track_caller]
pub fn cgroup_limits_available() -> bool {
    let d = doctor();
    if d["cgroup"]["limits"]["ok"] == true {
        return true;
    }
    missing_capability(&format!(
        "`cordon doctor` says no cgroup can enforce memory/pids limits here: {}",
        d["cgroup"]
    ));
    false
}

/// Whether overlay workspaces work here (`cordon doctor`); else the overlay cases fail (or
/// skip outside CI, as [`missing_capability`] decides).
pub fn overlay_available() -> bool {
    sandbox_available() && {
        let home = TestDir::new();
        let out = cordon()
            .env("CORDON_HOME", home.path())
            .args(["doctor", "--json"])
            .output()
            .unwrap();
        let doctor: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if doctor["workspaces"]["overlay"]["ok"] == true {
            true
        } else {
            missing_capability(&format!("overlay workspaces: {doctor}"));
            false
        }
    }
}
