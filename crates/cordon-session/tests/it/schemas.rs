//! The JSON Schemas of the session documents, committed under `schema/`, match the types.
//! Regenerate with `UPDATE_SCHEMAS=1 cargo test --workspace schema`.

fn check<T: schemars::JsonSchema>(file: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema")
        .join(file);
    cordon_types::check_committed_schema(&path, &cordon_types::schema_json::<T>()).unwrap();
}

#[test]
fn session_schemas_are_current() {
    check::<cordon_session::SessionRecord>("session.v1.json");
    check::<cordon_session::SessionList>("session-list.v1.json");
    check::<cordon_session::PushReport>("session-push.v1.json");
    check::<cordon_session::PullReport>("session-pull.v1.json");
    check::<cordon_session::ForkReport>("session-fork.v1.json");
    check::<cordon_session::SessionDiff>("session-diff.v1.json");
    check::<cordon_session::ReviewEvent>("review-event.v1.json");
}
