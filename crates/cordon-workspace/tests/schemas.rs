//! The JSON Schemas of the workspace documents, committed under `schema/`, match the types.
//! Regenerate with `UPDATE_SCHEMAS=1 cargo test -p cordon-workspace --test schemas`.

fn check<T: schemars::JsonSchema>(file: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema")
        .join(file);
    let schema = schemars::schema_for!(T);
    let generated = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    if std::env::var_os("UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "schema/{file} is stale; regenerate with `UPDATE_SCHEMAS=1 cargo test -p cordon-workspace --test schemas`"
    );
}

#[test]
fn workspace_schemas_are_current() {
    check::<cordon_workspace::WorkspaceRecord>("workspace.v1.json");
    check::<cordon_workspace::WorkspaceInfo>("workspace-info.v1.json");
    check::<cordon_workspace::ApplyReport>("workspace-apply.v1.json");
    check::<cordon_workspace::WorkspaceDiff>("workspace-diff.v1.json");
    check::<cordon_workspace::GcReport>("workspace-gc.v1.json");
}
