//! What the supervised-mode tests share: a shell that plays the supervisor, writing a real
//! `ChildReport` on fd 3.

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
