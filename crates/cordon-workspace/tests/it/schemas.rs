//! The JSON Schemas of the workspace documents, committed under `schema/`, match the types.
//! Regenerate with `UPDATE_SCHEMAS=1 cargo test --workspace schema`.

fn check<T: schemars::JsonSchema>(file: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema")
        .join(file);
    cordon_types::check_committed_schema(&path, &cordon_types::schema_json::<T>()).unwrap();
}

#[test]
fn workspace_schemas_are_current() {
    check::<cordon_workspace::WorkspaceRecord>("workspace.v1.json");
    check::<cordon_workspace::WorkspaceInfo>("workspace-info.v1.json");
    check::<cordon_workspace::ApplyReport>("workspace-apply.v1.json");
    check::<cordon_workspace::WorkspaceDiff>("workspace-diff.v1.json");
    check::<cordon_workspace::GcReport>("workspace-gc.v1.json");
    check::<cordon_workspace::WorkspaceList>("workspace-list.v1.json");
}
