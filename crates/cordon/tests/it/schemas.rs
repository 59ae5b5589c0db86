//! The JSON Schemas of the documents the CLI composes, committed under `schema/`, match the
//! types. Regenerate with `UPDATE_SCHEMAS=1 cargo test --workspace schema`.

#[test]
fn gc_schema_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/gc.v1.json");
    let generated = cordon_types::schema_json::<cordon::documents::GcSummary>();
    cordon_types::check_committed_schema(&path, &generated).unwrap();
}

#[test]
fn error_schema_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/error.v1.json");
    let generated = cordon_types::schema_json::<cordon::documents::ErrorDocument>();
    cordon_types::check_committed_schema(&path, &generated).unwrap();
}
