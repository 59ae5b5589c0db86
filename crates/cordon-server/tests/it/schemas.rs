//! The documents of the job service, committed under `schema/`, must match the Rust types.
//! Regenerate with `UPDATE_SCHEMAS=1 cargo test --workspace schema`.

use std::path::PathBuf;

use cordon_server::{
    ApiError, AttemptList, DeliveryList, JobDocument, JobList, JobRequest, Policy, TokenDocument,
    TokenList, WorkerList,
};

fn check(file: &str, generated: String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema")
        .join(file);
    cordon_types::check_committed_schema(&path, &generated).unwrap();
}

#[test]
fn job_schema_is_current() {
    check("job.v1.json", cordon_types::schema_json::<JobDocument>());
}

#[test]
fn job_list_schema_is_current() {
    check("job-list.v1.json", cordon_types::schema_json::<JobList>());
}

#[test]
fn job_request_schema_is_current() {
    check(
        "job-request.v1.json",
        cordon_types::schema_json::<JobRequest>(),
    );
}

#[test]
fn api_error_schema_is_current() {
    check("api-error.v1.json", cordon_types::schema_json::<ApiError>());
}

#[test]
fn server_policy_schema_is_current() {
    check(
        "cordon-server-toml.v1.json",
        cordon_types::schema_json::<Policy>(),
    );
}

#[test]
fn openapi_schema_document_is_current() {
    check("openapi.json", cordon_server::openapi_document());
}

#[test]
fn job_documents_refuse_foreign_tags() {
    let doc = serde_json::json!({"schema": "cordon.job/v2"});
    let error = serde_json::from_value::<JobDocument>(doc).expect_err("a foreign tag");
    assert!(error.to_string().contains("unsupported schema"), "{error}");
}

#[test]
fn token_schemas_are_current() {
    check(
        "token.v1.json",
        cordon_types::schema_json::<TokenDocument>(),
    );
    check(
        "token-list.v1.json",
        cordon_types::schema_json::<TokenList>(),
    );
}

#[test]
fn operator_schemas_are_current() {
    check(
        "attempt-list.v1.json",
        cordon_types::schema_json::<AttemptList>(),
    );
    check(
        "delivery-list.v1.json",
        cordon_types::schema_json::<DeliveryList>(),
    );
    check(
        "worker-list.v1.json",
        cordon_types::schema_json::<WorkerList>(),
    );
}
