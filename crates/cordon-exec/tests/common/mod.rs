//! What the supervised-mode tests share: a shell that plays the supervisor, writing a real
//! `ChildReport` on fd 3.
#![allow(dead_code, reason = "each test binary uses its part")]

use cordon_exec::RunSpec;
use cordon_types::{ChildReport, SandboxSummary};

pub fn supervised(script: &str, report: &ChildReport, sandbox: Option<SandboxSummary>) -> RunSpec {
    let mut spec = RunSpec::new("sh", ["-c", script]);
    spec.supervised = true;
    spec.sandbox = sandbox;
    spec.env.set.push((
        "REPORT".into(),
        serde_json::to_string(report).unwrap().into(),
    ));
    spec
}

/// A supervisor in a PID namespace of its own (as the sandbox's PID 1) that closes its output,
/// sends its report and then takes its time to exit (`sleep`, standing in for the namespaces
/// being taken down).
pub fn pid_1_supervisor(then: &str, leave: bool) -> (RunSpec, ChildReport) {
    let report = ChildReport {
        exit_code: Some(7),
        tree_rusage: Some(cordon_types::ChildRusage {
            user_us: 12_000,
            sys_us: 34_000,
            max_rss_bytes: 1 << 20,
        }),
        ..ChildReport::default()
    };
    let mut spec = supervised(
        &format!(
            "echo before-the-report; exec 0<&- 1>&- 2>&-; printf '%s\\n' \"$REPORT\" >&3; exec 3>&-; {then}"
        ),
        &report,
        None,
    );
    spec.namespaces = libc::CLONE_NEWUSER | libc::CLONE_NEWPID;
    spec.exclusive_children = true;
    spec.leave_exiting_supervisor = leave;
    (spec, report)
}

/// This process's children whose command line contains `marker` (other tests may run in
/// this process at the same time).
pub fn own_children(marker: &str) -> Vec<i32> {
    cordon_exec::children_of(std::process::id() as i32)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}
