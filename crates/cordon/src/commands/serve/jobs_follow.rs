//! `cordon jobs` shortcuts and the text of a followed live log: `jobs run -- CMD ARGS…` and
//! `jobs verify --repo URL` build the submission a user would otherwise write by hand;
//! `jobs logs --follow` (and `--wait`) prints the program's output as it comes, each stage's
//! start and end, and, once the job ends, its verdict with the findings.

use std::io::Write;
use std::path::Path;

use crate::exit::{CliError, Exit};

/// The project of a shortcut: `--project`, else `$CORDON_PROJECT`.
pub(super) fn project(given: Option<&String>) -> Result<String, CliError> {
    given
        .cloned()
        .or_else(|| std::env::var("CORDON_PROJECT").ok())
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            CliError::msg(
                Exit::Usage,
                "no project: give --project P (or set CORDON_PROJECT)",
            )
        })
}

/// The submission of `jobs run -- CMD ARGS…`.
pub(super) fn run_request(project: &str, argv: &[String]) -> Vec<u8> {
    serde_json::json!({"project": project, "type": "run", "inputs": {"argv": argv}})
        .to_string()
        .into_bytes()
}

/// The submission of `jobs verify --repo URL [--ref R] [--patch FILE]`.
pub(super) fn verify_request(
    project: &str,
    repo: &str,
    rev: Option<&str>,
    patch: Option<&Path>,
) -> Result<Vec<u8>, CliError> {
    let mut inputs = serde_json::json!({"repo": repo});
    if let Some(rev) = rev {
        inputs["ref"] = rev.into();
    }
    if let Some(path) = patch {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::usage(e).context(format!("cannot read {}", path.display())))?;
        inputs["patch"] = text.into();
    }
    Ok(
        serde_json::json!({"project": project, "type": "verify", "inputs": inputs})
            .to_string()
            .into_bytes(),
    )
}

/// One event of a followed live log as text: output to stdout (stderr's to stderr), stage
/// starts and ends and the verdict to stderr. Returns the job's final state at its `end`.
pub(super) fn print_event(kind: &str, data: &serde_json::Value) -> Result<Option<String>, ()> {
    let text = |key: &str| data.get(key).and_then(|t| t.as_str()).unwrap_or("");
    match kind {
        "output" if text("stream") == "stderr" => eprint!("{}", text("text")),
        "output" => {
            let mut out = std::io::stdout().lock();
            out.write_all(text("text").as_bytes())
                .and_then(|()| out.flush())
                .map_err(|_| ())?;
        }
        "stage" => match data.get("duration_ms").and_then(serde_json::Value::as_u64) {
            Some(ms) => eprintln!("── stage {}: {} ({ms} ms)", text("stage"), text("status")),
            None => eprintln!("── stage {}: {}", text("stage"), text("status")),
        },
        "end" => {
            if let Some(report) = data.get("result").filter(|r| r.get("overall").is_some()) {
                verdict(report);
            }
            return Ok(Some(text("state").to_owned()));
        }
        _ => {}
    }
    Ok(None)
}

/// A verification's verdict and its findings (at most 20), to stderr.
fn verdict(report: &serde_json::Value) {
    let overall = report["overall"].as_str().unwrap_or("?");
    eprintln!("── verdict: {overall}");
    if let Some(reason) = report["failure"]["reason"].as_str() {
        eprintln!("   {reason}");
    }
    let findings = report["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|stage| {
            let name = stage["name"].as_str().unwrap_or("?").to_owned();
            stage["findings"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |f| (name.clone(), f))
        });
    for (n, (stage, finding)) in findings.enumerate() {
        if n == 20 {
            eprintln!("   … more findings in the report (cordon jobs show --json)");
            break;
        }
        let place = match (finding["file"].as_str(), finding["line"].as_u64()) {
            (Some(file), Some(line)) => format!("{file}:{line}: "),
            (Some(file), None) => format!("{file}: "),
            _ => String::new(),
        };
        eprintln!(
            "   {stage}: {place}{}",
            finding["message"].as_str().unwrap_or("")
        );
    }
}
