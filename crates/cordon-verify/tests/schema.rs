//! The committed JSON Schema of `cordon.toml` must match the config types.
//! Regenerate with `UPDATE_SCHEMAS=1 cargo test -p cordon-verify --test schema`.

#[test]
fn cordon_toml_schema_is_current() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/cordon-toml.v1.json");
    let generated = cordon_types::schema_json::<cordon_verify::Config>();
    if std::env::var_os("UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "schema/cordon-toml.v1.json is stale; regenerate it with \
         `UPDATE_SCHEMAS=1 cargo test -p cordon-verify --test schema`"
    );
}
