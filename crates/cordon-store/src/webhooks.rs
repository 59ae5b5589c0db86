//! Webhook deliveries: when a job ends, one delivery per webhook of its project is queued with
//! the job's document (the same bytes on every try). Any process may take a delivery that is
//! due ([`Store::claim_delivery`], locked so that two processes never send it at once), and
//! records each try ([`Store::record_delivery_try`]): delivered, tried again later, or given
//! up. The store keeps every try, for operators to see.

use std::time::Duration;

use crate::backend::dispatch;
use crate::error::StoreError;
use crate::jobs::{JobId, random_name};
use crate::store::{Store, now_ms};

/// One webhook to notify of a job's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    /// Where the job document is POSTed.
    pub url: String,
    /// The name of the secret that signs it (its value is never stored).
    pub secret: String,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    /// Not delivered yet; tried again at `next_at_ms`.
    Pending,
    /// The receiver accepted it (a 2xx answer).
    Delivered,
    /// Given up after its last try.
    Failed,
}

impl DeliveryState {
    /// The state's name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        [
            DeliveryState::Pending,
            DeliveryState::Delivered,
            DeliveryState::Failed,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// One try of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryTry {
    /// Which try (from 1).
    pub number: u32,
    /// When it was sent (Unix epoch ms).
    pub at_ms: i64,
    /// How long the receiver took to answer (or to fail).
    pub duration_ms: u64,
    /// The receiver's HTTP status, when it answered.
    pub status: Option<u16>,
    /// Why the try failed, when it did.
    pub error: Option<String>,
}

/// What follows a try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryVerdict {
    /// Delivered: done.
    Delivered,
    /// Try again at this time (Unix epoch ms).
    Retry {
        /// When.
        next_at_ms: i64,
    },
    /// Given up.
    Failed,
}

/// A delivery as stored, with its tries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    /// Its id (`d-…`), also sent to the receiver (it may drop a delivery it has seen).
    pub id: String,
    /// The job whose end it reports.
    pub job_id: JobId,
    /// The job's project.
    pub project: String,
    /// Where it goes.
    pub url: String,
    /// The name of the secret that signs it.
    pub secret: String,
    /// The body sent (the job's document).
    pub body: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// Tries made.
    pub tries: u32,
    /// Tries allowed.
    pub max_tries: u32,
    /// When it is due (next).
    pub next_at_ms: i64,
    /// When it was queued.
    pub created_at_ms: i64,
    /// When it was delivered or given up.
    pub finished_at_ms: Option<i64>,
    /// Its tries, oldest first (filled by [`Store::job_deliveries`]).
    pub try_log: Vec<DeliveryTry>,
}

impl Store {
    /// Queues one delivery of `body` (the ended job's document) per webhook; returns their ids.
    pub fn enqueue_deliveries(
        &self,
        job: &JobId,
        project: &str,
        webhooks: &[NewDelivery],
        body: &str,
        max_tries: u32,
    ) -> Result<Vec<String>, StoreError> {
        let ids: Vec<String> = webhooks.iter().map(|_| random_name("d-")).collect();
        self.call("queue webhook deliveries", || {
            let queued = crate::backend::QueuedDeliveries {
                ids: &ids,
                job,
                project,
                webhooks,
                body,
                max_tries,
                now: now_ms(),
            };
            dispatch!(self.backend(), OpsBackend::enqueue_deliveries(&queued))
        })?;
        Ok(ids)
    }

    /// Takes the delivery that is due first, if any, for `lock` (no other process takes it
    /// meanwhile; a process that dies holding it frees it when the lock runs out).
    pub fn claim_delivery(&self, lock: Duration) -> Result<Option<DeliveryRow>, StoreError> {
        let now = now_ms();
        let until = now.saturating_add(i64::try_from(lock.as_millis()).unwrap_or(i64::MAX));
        self.call("take a webhook delivery", || {
            dispatch!(self.backend(), OpsBackend::claim_delivery(now, until))
        })
    }

    /// Records a try of delivery `id` and what follows it.
    pub fn record_delivery_try(
        &self,
        id: &str,
        attempt: &DeliveryTry,
        verdict: TryVerdict,
    ) -> Result<(), StoreError> {
        self.call("record a webhook delivery", || {
            dispatch!(
                self.backend(),
                OpsBackend::record_delivery_try(id, attempt, verdict)
            )
        })
    }

    /// When the next pending delivery is due, if one is.
    pub fn next_delivery_at(&self) -> Result<Option<i64>, StoreError> {
        self.call("look for webhook deliveries", || {
            dispatch!(self.backend(), OpsBackend::next_delivery_at())
        })
    }

    /// Every delivery of a job's end, oldest first, with its tries.
    pub fn job_deliveries(&self, job: &JobId) -> Result<Vec<DeliveryRow>, StoreError> {
        self.call("read webhook deliveries", || {
            dispatch!(self.backend(), OpsBackend::job_deliveries(job))
        })
    }
}
