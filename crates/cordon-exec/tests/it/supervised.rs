//! Supervised mode: the program is a supervisor that reports on fd 3 (the sandbox helper in
//! production). Here a shell plays the supervisor, writing a real `ChildReport`.

use cordon_exec::{RunIo, RunSpec};
use cordon_types::{ChildReport, SandboxSummary};

/// A shell that plays the supervisor, writing the real `ChildReport` `report` on fd 3.
fn supervised(script: &str, report: &ChildReport, sandbox: Option<SandboxSummary>) -> RunSpec {
    let mut spec = RunSpec::new("sh", ["-c", script]);
    spec.supervised = true;
    spec.sandbox = sandbox;
    spec.env.set.push((
        "REPORT".into(),
        serde_json::to_string(report).unwrap().into(),
    ));
    spec
}

#[test]
fn what_the_supervisor_killed_and_left_unenforced_reaches_the_result() {
    let report = ChildReport {
        exit_code: Some(0),
        processes_killed: 2,
        landlock_unenforced: vec!["fs.resolve_unix".into()],
        ..ChildReport::default()
    };
    let sandbox = SandboxSummary {
        enabled: true,
        landlock_abi: Some(7),
        seccomp: true,
        ..SandboxSummary::default()
    };
    // The supervisor also leaves a process of its own behind, which the executor kills.
    let spec = supervised(
        "sleep 60 & printf '%s\\n' \"$REPORT\" >&3",
        &report,
        Some(sandbox.clone()),
    );
    let outcome = cordon_exec::run(&spec, RunIo::default()).unwrap();
    let result = outcome.result;
    assert_eq!(result.exit_code, Some(0), "{result:#?}");
    assert_eq!(result.leaked.processes_killed, 3, "{result:#?}");
    pretty_assertions::assert_eq!(
        result.sandbox,
        SandboxSummary {
            landlock_unenforced: vec!["fs.resolve_unix".into()],
            ..sandbox
        }
    );
}

#[test]
fn a_clean_supervised_run_reports_no_leak_and_the_given_summary() {
    let report = ChildReport {
        exit_code: Some(0),
        ..ChildReport::default()
    };
    let sandbox = SandboxSummary {
        enabled: true,
        ..SandboxSummary::default()
    };
    let spec = supervised(
        "printf '%s\\n' \"$REPORT\" >&3",
        &report,
        Some(sandbox.clone()),
    );
    let result = cordon_exec::run(&spec, RunIo::default()).unwrap().result;
    assert_eq!(result.leaked.processes_killed, 0, "{result:#?}");
    pretty_assertions::assert_eq!(result.sandbox, sandbox);
}
