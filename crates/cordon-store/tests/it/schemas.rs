//! The JSON Schemas of the documents `cordon runs` prints, committed under `schema/`, must
//! match the Rust types. Regenerate with `UPDATE_SCHEMAS=1 cargo test --workspace schema`.

use std::path::PathBuf;

use cordon_store::{ExportedChunk, RunExport, RunList, RunRecord};

fn check(file: &str, generated: String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema")
        .join(file);
    cordon_types::check_committed_schema(&path, &generated).unwrap();
}

#[test]
fn run_list_schema_is_current() {
    check("run-list.v1.json", cordon_types::schema_json::<RunList>());
}

#[test]
fn run_record_schema_is_current() {
    check(
        "run-record.v1.json",
        cordon_types::schema_json::<RunRecord>(),
    );
}

#[test]
fn run_export_schema_is_current() {
    check(
        "run-export.v1.json",
        cordon_types::schema_json::<RunExport>(),
    );
}

/// One line of `cordon runs logs --json` (JSON Lines).
#[test]
fn run_chunk_schema_is_current() {
    check(
        "run-chunk.v1.json",
        cordon_types::schema_json::<ExportedChunk>(),
    );
}

#[test]
fn documents_refuse_foreign_tags() {
    let value = serde_json::json!({"schema": "cordon.run-list/v2", "runs": []});
    let error = serde_json::from_value::<RunList>(value).expect_err("a foreign tag");
    assert!(error.to_string().contains("unsupported schema"), "{error}");
    let value = serde_json::json!({"schema": "cordon.run-list/v1", "runs": []});
    let list = serde_json::from_value::<RunList>(value).expect("our tag");
    assert!(list.runs.is_empty());
}
