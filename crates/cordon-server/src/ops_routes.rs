//! The operators' routes: a job's attempts (`GET /v1/jobs/{id}/attempts`) and the workers
//! sharing the store (`GET /v1/workers`, an operator token's).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;

use crate::http::{authenticate, blocking};
use crate::ops_api::{AttemptDocument, AttemptList, AttemptListTag, WorkerDocument, WorkerList};
use crate::service::{RequestError, Service, now_ms, require};

/// Every attempt of a job the token may see, oldest first.
pub(crate) async fn attempts(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<AttemptList>, RequestError> {
    let token = authenticate(&service, &headers).await?;
    let (job, attempts) = blocking(move || {
        let job = service.visible_job(&token, &id)?;
        let attempts = service.store.job_attempts(&job.id)?;
        Ok((job, attempts))
    })
    .await?;
    Ok(Json(AttemptList {
        schema: AttemptListTag,
        job: job.id.to_string(),
        attempts: attempts.iter().map(AttemptDocument::from).collect(),
    }))
}

/// The webhook deliveries of a job's end, with every try.
pub(crate) async fn deliveries(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<crate::ops_api::DeliveryList>, RequestError> {
    let token = authenticate(&service, &headers).await?;
    let (job, rows) = blocking(move || {
        let job = service.visible_job(&token, &id)?;
        let rows = service.store.job_deliveries(&job.id)?;
        Ok((job, rows))
    })
    .await?;
    Ok(Json(crate::ops_api::DeliveryList {
        schema: crate::ops_api::DeliveryListTag,
        job: job.id.to_string(),
        deliveries: rows
            .iter()
            .map(crate::ops_api::DeliveryDocument::from)
            .collect(),
    }))
}

/// Every registered worker: live, draining or lost (an operator token: workers run every
/// project's jobs).
pub(crate) async fn workers(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
) -> Result<Json<WorkerList>, RequestError> {
    let token = authenticate(&service, &headers).await?;
    require(&token, "admin")?;
    if !crate::access::is_operator(&token) {
        return Err(RequestError::Scope("admin"));
    }
    let rows = blocking(move || Ok(service.store.list_workers()?)).await?;
    let now = now_ms();
    Ok(Json(WorkerList {
        schema: crate::ops_api::WorkerListTag,
        workers: rows.iter().map(|w| WorkerDocument::of(w, now)).collect(),
    }))
}
