//! The parsers on real output captured from the real tools (`testdata/`), and the bounds on
//! hostile output.

use std::path::PathBuf;

use cordon_types::{
    CapturedOutput, Finding, FindingKind, MAX_FINDING_MESSAGE_BYTES, MAX_FINDINGS, Severity,
};

use super::{PathContext, Tool, collect, parse_text};

/// Where the fixtures were captured: `/tmp/cap/<project>`.
fn at(project: &str) -> PathContext {
    PathContext {
        workspace: vec![PathBuf::from(format!("/tmp/cap/{project}"))],
        cwd: PathBuf::new(),
        go_module: Some("example.com/demo".into()),
    }
}

fn findings(tool: Tool, text: &str, project: &str) -> Vec<Finding> {
    parse_text(tool, text, &at(project)).into_parts().0
}

/// (test, file:line[:col], first message line) of each finding.
fn summary(found: &[Finding]) -> Vec<(Option<String>, Option<String>, String)> {
    found
        .iter()
        .map(|f| {
            (
                f.test.clone(),
                f.location(),
                f.message.lines().next().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn s(text: &str) -> Option<String> {
    Some(text.to_owned())
}

mod bounds;
mod go;
mod javascript;
mod python;
mod rust;
