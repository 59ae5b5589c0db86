//! The JSON Schemas committed under `schema/` must match the Rust types.
//! Regenerate with `UPDATE_SCHEMAS=1 cargo test --workspace schema`.

use std::path::PathBuf;

fn check(file: &str, generated: String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema")
        .join(file);
    cordon_types::check_committed_schema(&path, &generated).unwrap();
}

#[test]
fn run_result_schema_is_current() {
    check(
        "run-result.v1.json",
        cordon_types::schema_json::<cordon_types::RunResult>(),
    );
}

#[test]
fn run_report_schema_is_current() {
    check(
        "run-report.v1.json",
        cordon_types::schema_json::<cordon_types::RunReport>(),
    );
}

#[test]
fn run_result_round_trips_and_rejects_foreign_tags() {
    let value = serde_json::json!({
        "schema": "cordon.run-result/v2", "status": "pass"
    });
    let error = serde_json::from_value::<cordon_types::RunResult>(value).unwrap_err();
    assert!(error.to_string().contains("unsupported schema"), "{error}");
}
