//! Hearing of other processes' job events on PostgreSQL: every event write sends
//! `NOTIFY cordon_job_events, '<job id>'` at its commit; one connection per store handle
//! `LISTEN`s and tells the [`EventObserver`]. When that connection is lost (the database
//! restarted), it connects again, and the observer is told to look again (notifications sent
//! meanwhile are lost).

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;

use crate::observe::EventObserver;
use crate::postgres::PostgresBackend;

/// The channel job events are announced on.
pub(crate) const CHANNEL: &str = "cordon_job_events";

/// How long to wait before connecting again after the listening connection failed.
const RECONNECT: Duration = Duration::from_millis(500);

impl PostgresBackend {
    /// Starts listening, for as long as the backend lives.
    pub(crate) fn listen(&self, observer: Arc<dyn EventObserver>) {
        let pool = self.pool.clone();
        self.spawn(async move {
            loop {
                let mut listener = match PgListener::connect_with(&pool).await {
                    Ok(listener) => listener,
                    Err(_) if pool.is_closed() => return,
                    Err(_) => {
                        tokio::time::sleep(RECONNECT).await;
                        continue;
                    }
                };
                if listener.listen(CHANNEL).await.is_err() {
                    tokio::time::sleep(RECONNECT).await;
                    continue;
                }
                // Events recorded while nobody listened are looked for again.
                observer.resync();
                loop {
                    match listener.try_recv().await {
                        Ok(Some(notification)) => {
                            if let Ok(id) = notification.payload().parse() {
                                observer.recorded(&id);
                            }
                        }
                        // The connection was lost; the next receive reconnects, but what was
                        // announced meanwhile is gone.
                        Ok(None) => observer.resync(),
                        Err(_) => break,
                    }
                }
                if pool.is_closed() {
                    return;
                }
                tokio::time::sleep(RECONNECT).await;
            }
        });
    }
}
