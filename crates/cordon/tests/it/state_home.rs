//! cordon's own state (`CORDON_HOME`) is resolved one way by every part of cordon, and no
//! sandboxed program can see it — wherever it lies.

use std::process::Output;

use crate::support::{TestDir, cordon};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Regression: with a relative `CORDON_HOME=state`, the run history was created in the current
/// directory — the sandbox's writable root — and the program could rewrite it.
#[test]
fn a_relative_cordon_home_is_refused_before_anything_runs() {
    let work = TestDir::new();
    let out = cordon()
        .current_dir(work.path())
        .env("CORDON_HOME", "state")
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "mkdir -p state; echo x >> state/cordon.db",
        ])
        .output()
        .unwrap();
    // A bad setting, the user's to fix: a usage error.
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("CORDON_HOME=state is a relative path"),
        "{}",
        stderr(&out)
    );
    assert!(
        !work.path().join("state").exists(),
        "nothing ran, nothing was created"
    );
    for args in [
        &["runs", "list"][..],
        &["workspace", "list"][..],
        &["gc"][..],
    ] {
        let out = cordon()
            .current_dir(work.path())
            .env("CORDON_HOME", "state")
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(
            stderr(&out).contains("relative"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(!work.path().join("state").exists());
}

/// A home inside the working directory (the writable root) is masked: the program cannot read
/// or forge the history, and the run is still recorded there.
#[test]
fn a_cordon_home_inside_the_working_directory_is_invisible_to_the_program() {
    let work = TestDir::new();
    let home = work.path().join("state");
    let script = format!(
        "ls -A {h} | wc -l; cat {h}/cordon.db > /dev/null 2>&1 && echo READ; echo x >> {h}/cordon.db 2>/dev/null && echo WROTE; true",
        h = home.display()
    );
    let out = cordon()
        .current_dir(work.path())
        .env("CORDON_HOME", &home)
        .args(["run", "--json", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let stdout = result["stdout"]["head"].as_str().unwrap();
    assert_eq!(stdout.trim(), "0", "the home looks empty inside: {stdout}");
    let id = result["run_id"].as_str().unwrap();
    let shown = cordon()
        .env("CORDON_HOME", &home)
        .args(["runs", "show", "--json", id])
        .output()
        .unwrap();
    assert!(
        shown.status.success(),
        "the run was recorded: {}",
        stderr(&shown)
    );
}

/// A working directory inside cordon's state (other than a workspace's own tree) would expose
/// every workspace record: refused.
#[test]
fn a_working_directory_inside_cordon_home_is_refused() {
    let home = TestDir::new();
    let inside = home.path().join("workspaces");
    std::fs::create_dir_all(&inside).unwrap();
    let out = cordon()
        .env("CORDON_HOME", home.path())
        .arg("run")
        .arg("--cwd")
        .arg(&inside)
        .args(["--", "ls"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.contains("inside cordon's state directory"), "{text}");
    assert!(text.contains("hint:"), "{text}");
}
