//! The CLI's own surface: help, schemas.

mod support;

use support::cordon;

#[test]
fn printed_schemas_are_the_committed_ones() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema");
    for (document, file) in [
        ("run-result", "run-result.v1.json"),
        ("run-report", "run-report.v1.json"),
        ("cordon-toml", "cordon-toml.v1.json"),
        ("run-list", "run-list.v1.json"),
        ("run-record", "run-record.v1.json"),
        ("run-export", "run-export.v1.json"),
        ("run-chunk", "run-chunk.v1.json"),
        ("workspace", "workspace.v1.json"),
        ("workspace-info", "workspace-info.v1.json"),
        ("workspace-list", "workspace-list.v1.json"),
        ("workspace-apply", "workspace-apply.v1.json"),
        ("workspace-diff", "workspace-diff.v1.json"),
        ("gc", "gc.v1.json"),
        ("verify-plan", "verify-plan.v1.json"),
        ("error", "error.v1.json"),
        ("doctor", "doctor.v1.json"),
        ("session", "session.v1.json"),
        ("session-list", "session-list.v1.json"),
        ("session-push", "session-push.v1.json"),
        ("session-pull", "session-pull.v1.json"),
    ] {
        let out = cordon().args(["schema", document]).output().unwrap();
        assert!(out.status.success());
        let committed = std::fs::read_to_string(root.join(file)).unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            committed,
            "{document}"
        );
    }
}

#[test]
fn every_command_explains_itself() {
    for command in [
        "run",
        "verify",
        "workspace",
        "gc",
        "runs",
        "doctor",
        "schema",
        "session",
    ] {
        let out = cordon().args([command, "--help"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{command}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage: cordon"), "{command}: {text}");
        assert!(text.len() > 200, "{command} --help is too thin: {text}");
    }
    let out = cordon().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
