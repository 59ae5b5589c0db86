//! The JSON Schema of `cordon doctor --json`, committed under `schema/`, matches the types.
//! Regenerate with `UPDATE_SCHEMAS=1 cargo test --workspace schema`.

#[test]
fn doctor_schema_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/doctor.v1.json");
    let generated = cordon_types::schema_json::<cordon_sandbox::DoctorReport>();
    cordon_types::check_committed_schema(&path, &generated).unwrap();
}

#[test]
fn a_doctor_report_round_trips_through_its_schema_types() {
    let report = cordon_sandbox::doctor();
    let text = serde_json::to_string(&report).unwrap();
    let back: cordon_sandbox::DoctorReport = serde_json::from_str(&text).unwrap();
    pretty_assertions::assert_eq!(report, back);
    assert!(text.contains(r#""schema":"cordon.doctor/v1""#), "{text}");
}
