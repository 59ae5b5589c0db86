//! The JSON Schemas of the documents only `cordon mcp`'s tools answer with, committed under
//! `schema/`, match the types. Regenerate with `UPDATE_SCHEMAS=1 cargo test --workspace schema`.

fn check<T: schemars::JsonSchema>(file: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema")
        .join(file);
    cordon_types::check_committed_schema(&path, &cordon_types::schema_json::<T>()).unwrap();
}

#[test]
fn mcp_schemas_are_current() {
    check::<cordon_mcp::WorkspacePatch>("workspace-patch.v1.json");
    check::<cordon_mcp::RunLogs>("run-logs.v1.json");
}
