//! The OpenAPI 3.1 document of the service, generated from the wire types (committed as
//! `schema/openapi.json`; a test fails when they disagree).

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use crate::api::{
    ApiError, ApplyPatchInputs, CloneInputs, JobDocument, JobList, JobRequest, JobType, RunInputs,
    SessionCompareInputs, SessionCreateInputs, SessionExecInputs, SessionForkInputs, SessionInputs,
    VerifyInputs,
};
use crate::ops_api::{AttemptList, DeliveryList, WorkerList};
use crate::policy::Policy;

/// The component that describes a job type's inputs.
fn inputs_schema(job_type: JobType) -> &'static str {
    match job_type {
        JobType::Run => "RunInputs",
        JobType::Verify => "VerifyInputs",
        JobType::RepoClone => "CloneInputs",
        JobType::RepoApplyPatch => "ApplyPatchInputs",
        JobType::SessionCreate => "SessionCreateInputs",
        JobType::SessionPush | JobType::SessionPull | JobType::SessionRemove => "SessionInputs",
        JobType::SessionExec => "SessionExecInputs",
        JobType::SessionFork => "SessionForkInputs",
        JobType::SessionCompare => "SessionCompareInputs",
    }
}

/// The document, pretty-printed with a final newline.
pub fn document() -> String {
    let doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "cordon job service",
            "version": "1",
            "description": "Jobs (run, verify, repo.clone, repo.applyPatch, session.*) under a \
                            per-project policy, queued persistently, with live logs over \
                            Server-Sent Events."
        },
        "servers": [{"url": "http://127.0.0.1:7878"}],
        "security": [{"bearer": []}],
        "paths": paths(),
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": Value::Object(schemas())
        }
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("the document serializes");
    text.push('\n');
    text
}

/// The components' schemas, generated from the wire types; a submission's `inputs` depend on
/// its `type`, so `JobRequest` has one alternative per type.
fn schemas() -> serde_json::Map<String, Value> {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator();
    let mut refs = serde_json::Map::new();
    macro_rules! component {
        ($($t:ty),*) => {$(
            let schema = generator.subschema_for::<$t>();
            refs.insert(stringify!($t).to_owned(), schema.to_value());
        )*};
    }
    component!(
        JobRequest,
        JobDocument,
        JobList,
        AttemptList,
        DeliveryList,
        WorkerList,
        ApiError,
        RunInputs,
        VerifyInputs,
        CloneInputs,
        ApplyPatchInputs,
        SessionCreateInputs,
        SessionInputs,
        SessionExecInputs,
        SessionForkInputs,
        SessionCompareInputs,
        Policy
    );
    let mut schemas = generator.take_definitions(true);
    for (name, reference) in &refs {
        if !schemas.contains_key(name) {
            schemas.insert(name.clone(), reference.clone());
        }
    }
    // A submission's `inputs` depend on its `type`: one alternative per type, so that the
    // document says exactly which inputs go with which type.
    if let Some(request) = schemas.get("JobRequest").cloned() {
        let variants: Vec<Value> = JobType::ALL
            .iter()
            .map(|t| {
                let mut variant = request.clone();
                variant["properties"]["type"] = json!({"const": t.as_str()});
                variant["properties"]["inputs"] =
                    json!({"$ref": format!("#/components/schemas/{}", inputs_schema(*t))});
                if let Some(d) = variant.as_object_mut() {
                    d.remove("$schema");
                    d.insert("title".into(), json!(format!("a {} job", t.as_str())));
                }
                variant
            })
            .collect();
        schemas.insert(
            "JobRequest".into(),
            json!({"description": request["description"], "oneOf": variants}),
        );
    }
    schemas
}

/// The service's paths: each operation with its parameters and answers.
fn paths() -> Value {
    let r = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
    let error = |what: &str| json!({"description": what, "content": {"application/json": {"schema": r("ApiError")}}});
    let job = |what: &str| json!({"description": what, "content": {"application/json": {"schema": r("JobDocument")}}});
    // A 429 says when to try again: `busy` in a second, `budget` when the budget resets.
    let limited = |what: &str| {
        let mut answer = error(what);
        answer["headers"] = json!({"Retry-After": {
            "description": "seconds to wait before trying again (`busy`: 1; `budget`: until the budget resets)",
            "schema": {"type": "integer", "minimum": 1}
        }});
        answer
    };
    let job_links = |what: &str| {
        let mut answer = job(what);
        let link = |operation: &str| json!({"operationId": operation, "parameters": {"id": "$response.body#/id"}});
        answer["links"] = json!({
            "GetJob": link("getJob"),
            "CancelJob": link("cancelJob"),
            "JobEvents": link("jobEvents"),
            "JobTranscript": link("jobTranscript"),
        });
        answer
    };
    let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^j-[a-z2-7]{10}$"}});
    let auth_errors = |mut responses: Value| {
        responses["401"] = error("no valid bearer token");
        responses["403"] = error("the token lacks the scope, or policy refuses");
        responses
    };
    json!({
        "/healthz": {"get": {"security": [], "operationId": "healthz",
            "responses": {"200": {"description": "the server is up (liveness: the store is not asked)", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
        "/readyz": {"get": {"security": [], "operationId": "readyz",
            "responses": {
                "200": {"description": "the store answers: the server can serve requests", "content": {"text/plain": {"schema": {"type": "string"}}}},
                "503": {"description": "the store does not answer (the server's log says why, once per outage)", "content": {"text/plain": {"schema": {"type": "string"}}}}
            }}},
        "/metrics": {"get": {"operationId": "metrics",
            "responses": auth_errors(json!({"200": {"description": "Prometheus text: queue depth, running jobs, attempt durations by project, type and outcome (a token with the admin scope: an operator token sees every project)", "content": {"text/plain": {"schema": {"type": "string"}}}}}))}},
        "/openapi.json": {"get": {"security": [], "operationId": "openapi",
            "responses": {"200": {"description": "this document", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
        "/v1/jobs": {
            "post": {
                "operationId": "submitJob",
                "requestBody": {"required": true, "content": {"application/json": {"schema": r("JobRequest")}}},
                "responses": auth_errors(json!({
                    "201": job_links("queued"),
                    "200": job("the job this idempotency key already names"),
                    "400": error("malformed request (the field is named)"),
                    "409": error("the idempotency key already names a job submitted with a different type or inputs (`job` names it)"),
                    "413": error("the body is larger than the server takes (`too_large`)"),
                    "429": limited("the project's daily budget is spent (`budget`; resets_at says when it resets), or its queue is full (`busy`: max_queued)")
                }))
            },
            "get": {
                "operationId": "listJobs",
                "parameters": [
                    {"name": "project", "in": "query", "schema": {"type": "string"}},
                    {"name": "state", "in": "query", "schema": {"type": "string", "enum": ["queued", "running", "succeeded", "failed", "cancelled", "interrupted"]}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500}},
                    {"name": "cursor", "in": "query", "schema": {"type": "string", "pattern": "^-?[0-9]{1,18}\\.j-[a-z2-7]{10}$"}}
                ],
                "responses": auth_errors(json!({
                    "200": {"description": "newest first", "content": {"application/json": {"schema": r("JobList")}}},
                    "400": error("bad query")
                }))
            }
        },
        "/v1/jobs/{id}": {"get": {"operationId": "getJob", "parameters": [id.clone()],
            "responses": auth_errors(json!({"200": job("the job"), "404": error("no such job visible to this token")}))}},
        "/v1/jobs/{id}/cancel": {"post": {"operationId": "cancelJob", "parameters": [id.clone()],
            "responses": auth_errors(json!({"200": job("the job in its final state, or `cancelling` when it did not stop within 5 s"), "404": error("no such job visible to this token")}))}},
        "/v1/jobs/{id}/rerun": {"post": {"operationId": "rerunJob", "parameters": [id.clone()],
            "responses": auth_errors(json!({
                "201": job_links("a new job with the same type, inputs, secrets, variables, priority and timeout (`rerun_of` names the original), queued under today's policy"),
                "404": error("no such job visible to this token"),
                "409": error("the job has not ended yet"),
                "429": limited("the project's daily budget is spent, or its queue is full")
            }))}},
        "/v1/jobs/{id}/events": {"get": {"operationId": "jobEvents",
            "parameters": [id.clone(), {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}}],
            "responses": auth_errors(json!({
                "200": {"description": "Server-Sent Events: state, stage, output (redacted), end; each event's `data` is a JSON object, its `id` the event's sequence number (send it back as `Last-Event-ID` to resume)",
                    "content": {"text/event-stream": {"schema": {
                        "type": "object",
                        "required": ["id", "event", "data"],
                        "properties": {
                            "id": {"type": "string", "pattern": "^[0-9]+$"},
                            "event": {"enum": ["state", "stage", "output", "end"]},
                            "data": {"type": "string", "contentMediaType": "application/json"}
                        }
                    }}}},
                "404": error("no such job visible to this token"),
                "429": limited("this token (32) or the server (2048) holds as many live logs open as it may: close one, or try again later")
            }))}},
        "/v1/jobs/{id}/transcript": {"get": {"operationId": "jobTranscript",
            "parameters": [id.clone(), {"name": "attempt", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 4294967295_u64}}],
            "responses": auth_errors(json!({
                "200": {"description": "the job's output so far (redacted): every attempt's, or one attempt's (`attempt`)", "content": {"text/plain": {"schema": {"type": "string"}}}},
                "400": error("bad query"),
                "404": error("no such job visible to this token, or no such attempt")
            }))}},
        "/v1/jobs/{id}/attempts": {"get": {"operationId": "jobAttempts", "parameters": [id.clone()],
            "responses": auth_errors(json!({
                "200": {"description": "every attempt of the job, oldest first: its worker, start, end (by the worker's clock), outcome, failure", "content": {"application/json": {"schema": r("AttemptList")}}},
                "404": error("no such job visible to this token")
            }))}},
        "/v1/jobs/{id}/deliveries": {"get": {"operationId": "jobDeliveries", "parameters": [id],
            "responses": auth_errors(json!({
                "200": {"description": "the webhook deliveries of the job's end (its project's `webhooks`), oldest first, with every try", "content": {"application/json": {"schema": r("DeliveryList")}}},
                "404": error("no such job visible to this token")
            }))}},
        "/v1/workers": {"get": {"operationId": "listWorkers",
            "responses": auth_errors(json!({
                "200": {"description": "every worker registered in the store (an operator token: project `*`, scope admin): slots, running jobs, last heartbeat, state", "content": {"application/json": {"schema": r("WorkerList")}}}
            }))}}
    })
}
