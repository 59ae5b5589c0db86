//! The dedicated helper executable: it runs only plans of its own build, and hands anything
//! else over to cordon's own entry point.

use std::process::Command;

use cordon_sandbox_init::{BUILD_ENV, FALLBACK_ENV, HELPER_BUILD, INIT_ARG, PLAN_ENV};

fn helper() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cordon-sandbox-init"));
    command
        .env_remove(BUILD_ENV)
        .env_remove(FALLBACK_ENV)
        .env_remove(PLAN_ENV);
    command
}

#[test]
fn a_helper_of_another_build_hands_over_to_cordon() {
    let out = helper()
        .args([INIT_ARG, "--", "program", "arg"])
        .env(BUILD_ENV, "0.0.0-another-build")
        .env(FALLBACK_ENV, "/bin/echo")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{INIT_ARG} -- program arg\n"),
        "the fallback got the same arguments"
    );
}

#[test]
fn without_cordons_identity_the_helper_refuses() {
    let out = helper().args([INIT_ARG, "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let out = helper().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cordon's sandbox helper"));
}

#[test]
fn a_helper_of_this_build_runs_the_plan() {
    // No plan in the environment: the helper itself runs and reports that, on its report
    // descriptor (absent here), and exits 0 — it did not hand over.
    let out = helper()
        .args([INIT_ARG, "--", "true"])
        .env(BUILD_ENV, HELPER_BUILD)
        .env(FALLBACK_ENV, "/bin/false")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
