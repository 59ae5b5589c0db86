//! Supervised mode: the program is a supervisor that reports on fd 3 (the sandbox helper in
//! production). Here a shell plays the supervisor, writing a real `ChildReport`.

mod common;

use cordon_exec::{RunIo, RunSpec};
use cordon_types::{ChildReport, SandboxSummary};

use common::{own_children, pid_1_supervisor, supervised};

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

#[test]
fn a_pid_1_supervisor_is_reaped_before_the_run_returns_unless_the_caller_exits() {
    let (spec, _) = pid_1_supervisor("exec sleep 0.21", false);
    let result = cordon_exec::run(&spec, RunIo::default()).unwrap().result;
    assert_eq!(result.exit_code, Some(7), "{result:#?}");
    assert_eq!(own_children("0.21"), Vec::<i32>::new());
}

#[test]
fn a_pid_1_supervisor_killed_before_its_report_is_waited_for() {
    // No report: the run ends when the supervisor does, and says it did not report.
    let mut spec = RunSpec::new("sh", ["-c", "exec 3>&-; sleep 0.11; kill -9 $$"]);
    spec.supervised = true;
    spec.namespaces = libc::CLONE_NEWUSER | libc::CLONE_NEWPID;
    spec.exclusive_children = true;
    spec.leave_exiting_supervisor = true;
    let result = cordon_exec::run(&spec, RunIo::default()).unwrap().result;
    assert_eq!(result.exit_code, None, "{result:#?}");
    let failure = format!("{:?}", result.failure);
    assert!(
        failure.contains("without reporting the program's status"),
        "{result:#?}"
    );
    assert_eq!(own_children("sleep 0.11"), Vec::<i32>::new());
}
