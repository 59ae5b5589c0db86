//! A cordon built without its default features (`--no-default-features`: the local tool
//! alone): what the build lacks is refused, saying so, never done some other way. Compiled
//! only into such a build (`cargo nextest run -p cordon --no-default-features --test
//! without_features`, which scripts/test runs).
#![cfg(not(all(feature = "postgres", feature = "server", feature = "mcp")))]

/// A PostgreSQL store is refused before the program runs: not recorded in an SQLite file
/// named after the URL, and the program does not run unrecorded.
#[cfg(not(feature = "postgres"))]
#[test]
fn a_build_without_postgres_refuses_a_postgres_store() {
    let marker = cordon_test_support::TestDir::new();
    let ran = marker.path().join("ran");
    let out = cordon_test_support::cordon()
        .env("CORDON_STORE", "postgres://cordon:s3cret@db.invalid/cordon")
        .args(["run", "--no-sandbox", "--", "touch"])
        .arg(&ran)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("this binary was built without PostgreSQL support"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: "), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
    assert!(!ran.exists(), "the program ran");
    let out = cordon_test_support::cordon()
        .env("CORDON_STORE", "postgresql://cordon@db.invalid/cordon")
        .args(["runs", "list"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("this binary was built without PostgreSQL support"),
        "{stderr}"
    );
}

/// The job service's commands are hidden from `--help` and each says this build lacks it
/// (exit 2), whatever options follow, also as a `cordon.error/v1` document when asked for
/// JSON; so do its documents' schemas.
#[cfg(not(feature = "server"))]
#[test]
fn a_build_without_the_server_says_so_for_its_commands() {
    let help = cordon_test_support::cordon()
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("run"), "{help}");
    assert!(!help.contains("serve"), "{help}");
    for args in [
        &["serve", "--listen", "127.0.0.1:0"][..],
        &["worker", "--help"],
        &["token", "list"],
        &["jobs", "submit", "-"],
        &["schema", "job"],
    ] {
        let out = cordon_test_support::cordon().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("is not in this build: cordon was built without the job service"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("--features server"), "{args:?}: {stderr}");
    }
    // Asked for JSON, the refusal is the error document every command prints.
    let out = cordon_test_support::cordon()
        .args(["token", "list", "--json"])
        .output()
        .unwrap();
    let document: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(document["schema"], "cordon.error/v1");
    assert_eq!(document["code"], 2);
    assert_eq!(document["kind"], "usage");
    // That document is the same contract as in the default build (it can carry the
    // service's error answer, whose type does not come with the service).
    let out = cordon_test_support::cordon()
        .args(["schema", "error"])
        .output()
        .unwrap();
    let committed = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/error.v1.json"),
    )
    .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), committed);
}

/// `cordon mcp` is hidden from `--help` and says this build lacks it (exit 2), whatever
/// options follow.
#[cfg(not(feature = "mcp"))]
#[test]
fn a_build_without_mcp_says_so() {
    let help = cordon_test_support::cordon()
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(!help.contains(" mcp "), "{help}");
    for args in [
        &["mcp"][..],
        &["mcp", "--repo", ".", "--allow-network", "host"],
    ] {
        let out = cordon_test_support::cordon().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("`cordon mcp` is not in this build"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("--features mcp"), "{args:?}: {stderr}");
    }
}
