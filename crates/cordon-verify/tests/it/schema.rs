//! The committed JSON Schema of `cordon.toml` must match the config types.
//! Regenerate with `UPDATE_SCHEMAS=1 cargo test --workspace schema`.

#[test]
fn cordon_toml_schema_is_current() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/cordon-toml.v1.json");
    let generated = cordon_types::schema_json::<cordon_verify::Config>();
    cordon_types::check_committed_schema(&path, &generated).unwrap();
}

#[test]
fn verify_plan_schema_is_current() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/verify-plan.v1.json");
    let generated = cordon_types::schema_json::<cordon_verify::PlanDocument>();
    cordon_types::check_committed_schema(&path, &generated).unwrap();
}

#[test]
fn session_compare_schema_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema/session-compare.v1.json");
    let generated = cordon_types::schema_json::<cordon_verify::CompareReport>();
    cordon_types::check_committed_schema(&path, &generated).unwrap();
}
