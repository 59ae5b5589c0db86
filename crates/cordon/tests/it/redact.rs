//! Secrets never leave cordon in clear: not on the terminal, not in results or reports.

use crate::support;
use crate::support::{DRAINED_SH, TestDir, cordon};

const SECRET: &str = "tok-9f8e7d6c5b4a39281706";

/// A program that prints the secret in two writes split inside the value (cordon has read the
/// first before the second is written), on both streams.
fn split_printer() -> String {
    format!(
        "{DRAINED_SH}v=$MY_TOKEN; printf 'a %s' \"${{v%???????????}}\"; drained; \
         printf '%s b\\n' \"${{v#???????????????}}\" | cut -c1-200 >/dev/null; \
         printf '%s' \"$v\" | head -c 13; drained; printf '%s\\n' \"$v\" | tail -c +14; \
         echo \"err $v\" >&2"
    )
}

fn assert_clean(text: &str, what: &str) {
    assert!(!text.contains(SECRET), "{what} leaks the secret: {text}");
    for cut in [10, 13, 16] {
        assert!(
            !text.contains(&SECRET[..cut]) || text.contains("[REDACTED"),
            "{what}: prefix of the secret visible: {text}"
        );
    }
}

#[test]
fn secret_split_across_writes_is_redacted_everywhere_in_both_modes() {
    for mode in [&["--no-sandbox"][..], &["--secret", "MY_TOKEN"][..]] {
        // Terminal (passthrough).
        let out = cordon()
            .env("MY_TOKEN", SECRET)
            .arg("run")
            .args(mode)
            .args(["--", "sh", "-c", &split_printer()])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_clean(&stdout, "stdout");
        assert_clean(&stderr, "stderr");
        assert!(stdout.contains("[REDACTED:MY_TOKEN]"), "{mode:?}: {stdout}");
        assert!(
            stderr.contains("err [REDACTED:MY_TOKEN]"),
            "{mode:?}: {stderr}"
        );
        // Result document.
        let out = cordon()
            .env("MY_TOKEN", SECRET)
            .args(["run", "--json"])
            .args(mode)
            .args(["--", "sh", "-c", &split_printer()])
            .output()
            .unwrap();
        let json = String::from_utf8_lossy(&out.stdout);
        assert_clean(&json, "result");
        assert!(json.contains("[REDACTED:MY_TOKEN]"), "{json}");
    }
}

#[test]
fn builtin_token_patterns_are_redacted_without_configuration() {
    let out = cordon()
        .args(["run", "--json", "--", "sh", "-c"])
        .arg("echo ghp_0123456789abcdefghijABCDEFGHIJ012345; echo 'curl https://bob:hunter2hunter2@example.com'; echo 'Authorization: Bearer abcdefghijklmnopqrstuvwx'")
        .output()
        .unwrap();
    let json = String::from_utf8_lossy(&out.stdout);
    for raw in [
        "ghp_0123456789abcdefghijABCDEFGHIJ012345",
        "hunter2hunter2",
        "abcdefghijklmnopqrstuvwx",
    ] {
        assert!(!json.contains(raw), "{raw} visible: {json}");
    }
    assert!(
        json.contains("bob:[REDACTED:url-password]@example.com"),
        "{json}"
    );
}

#[test]
fn verify_redacts_stage_secrets_and_config_patterns_in_every_report() {
    let repo = TestDir::new();
    let home = TestDir::new();
    let git = |args: &[&str]| support::git(repo.path(), args);
    repo.write(
        "cordon.toml",
        r#"
[redact]
patterns = ["internal-id-[0-9]{6}"]
allow = ["internal-id-000000"]

[[stage]]
name = "leaky"
category = "test"
run = ["sh", "-c", "echo \"token: $MY_TOKEN\"; echo internal-id-123456 >&2; echo public internal-id-000000; exit 1"]
secrets = ["MY_TOKEN"]
"#,
    );
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "x"]);
    let junit = home.path().join("r.xml");
    let md = home.path().join("r.md");
    let out = cordon()
        .env("CORDON_HOME", home.path())
        .env("MY_TOKEN", SECRET)
        .args(["verify", "--json", "--repo"])
        .arg(repo.path())
        .arg("--junit")
        .arg(&junit)
        .arg("--markdown")
        .arg(&md)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("token: [REDACTED:MY_TOKEN]"), "{report}");
    assert!(report.contains("[REDACTED:pattern-1]"), "{report}");
    assert!(
        report.contains("public internal-id-000000"),
        "allowlisted: {report}"
    );
    for (text, what) in [
        (report.to_string(), "report"),
        (String::from_utf8_lossy(&out.stderr).to_string(), "terminal"),
        (std::fs::read_to_string(&junit).unwrap(), "junit"),
        (std::fs::read_to_string(&md).unwrap(), "markdown"),
    ] {
        assert_clean(&text, what);
        assert!(!text.contains("internal-id-123456"), "{what}: {text}");
    }
}

#[test]
fn secrets_in_failure_reasons_and_command_lines_are_redacted() {
    for mode in [&["--no-sandbox"][..], &[][..]] {
        let out = cordon()
            .env("MY_TOKEN", SECRET)
            .args(["run", "--json", "--no-record"])
            .args(mode)
            .args(["--", SECRET])
            .output()
            .unwrap();
        let json = String::from_utf8_lossy(&out.stdout);
        assert!(json.contains("not found"), "{mode:?}: {json}");
        assert_clean(&json, "result");
    }
}

/// One redaction rule for `run` and `verify`: a secret-looking variable of cordon's own
/// environment is hidden even when the program gets its value some other way (here, a file
/// committed to the repository). Before the one run path, only `run` did this.
#[test]
fn cordons_own_secret_looking_variables_are_redacted_in_run_and_verify_alike() {
    let home = TestDir::new();
    let repo = TestDir::new();
    let value = "host-only-value-8c7b6a5f4e3d";
    repo.write("leak.txt", &format!("found {value}\n"));
    repo.write(
        "cordon.toml",
        "[[stage]]\nname = \"leak\"\ncategory = \"test\"\nrun = [\"cat\", \"leak.txt\"]\n",
    );
    let git = |args: &[&str]| support::git(repo.path(), args);
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "x"]);
    let verify = cordon()
        .env("CORDON_HOME", home.path())
        .env("DEPLOY_API_TOKEN", value)
        .args(["verify", "--json", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&verify.stdout);
    assert_eq!(verify.status.code(), Some(0), "{report}");
    assert!(!report.contains(value), "{report}");
    assert!(
        report.contains("found [REDACTED:DEPLOY_API_TOKEN]"),
        "{report}"
    );
    let run = cordon()
        .env("CORDON_HOME", home.path())
        .env("DEPLOY_API_TOKEN", value)
        .arg("run")
        .arg("--json")
        .arg("--cwd")
        .arg(repo.path())
        .args(["--", "cat", "leak.txt"])
        .output()
        .unwrap();
    let result = String::from_utf8_lossy(&run.stdout);
    assert!(!result.contains(value), "{result}");
    assert!(
        result.contains("found [REDACTED:DEPLOY_API_TOKEN]"),
        "{result}"
    );
}
