//! Webhooks: when a job ends, its job document is POSTed to each webhook of its project
//! (`[[projects.NAME.webhooks]]`), signed, and retried with backoff until the receiver
//! answers 2xx or [`MAX_TRIES`] tries failed; every delivery and try is recorded in the store
//! (`GET /v1/jobs/{id}/deliveries`).
//!
//! The signature: `X-Cordon-Signature: sha256=HEX`, the HMAC-SHA256 of `TIMESTAMP.BODY` with
//! the webhook's secret, where `TIMESTAMP` is the `X-Cordon-Timestamp` header (Unix seconds):
//! a receiver recomputes it, compares in constant time, and refuses a timestamp more than a
//! few minutes old (a replay). `X-Cordon-Delivery` names the delivery (the same on every try).
//!
//! One sender thread per process takes due deliveries from the store (a lock per delivery, so
//! processes sharing a store never send one twice at once).
//!
//! `https://` receivers are verified against the host's trust store (`SSL_CERT_FILE` or
//! `SSL_CERT_DIR` of the server's environment, else the system's roots), as the credential
//! proxy verifies its hosts.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cordon_store::{DeliveryRow, DeliveryTry, JobId, NewDelivery, TryVerdict};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::api::JobDocument;
use crate::service::{Service, now_ms};

/// Tries of one delivery at most.
pub const MAX_TRIES: u32 = 5;

/// How long a sender holds a delivery it took (another process may take it after).
const LOCK: Duration = Duration::from_secs(60);

/// How long a receiver may take to answer one try.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The longest wait of an idle sender before it looks for due deliveries again.
const IDLE: Duration = Duration::from_secs(1);

/// Where a webhook's deliveries go: an `http://` or `https://` URL taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `HOST:PORT`.
    pub authority: String,
    /// The path and query (`/` at least).
    pub path: String,
    /// Whether the receiver is reached over TLS (`https://`).
    pub tls: bool,
}

impl Target {
    /// Parses `http://HOST[:PORT][/PATH]` or `https://HOST[:PORT][/PATH]`.
    pub fn parse(url: &str) -> Result<Target, String> {
        let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (None, Some(rest)) => (rest, true),
            (None, None) => {
                return Err(format!(
                    "{url:?}: only http:// and https:// URLs are supported"
                ));
            }
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("{url:?}: no host (or a user in it)"));
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.contains(']'))
        {
            authority.to_owned()
        } else {
            format!("{authority}:{}", if tls { 443 } else { 80 })
        };
        Ok(Target {
            authority,
            path: path.to_owned(),
            tls,
        })
    }

    /// The host, as the receiver's certificate must name it (without brackets or port).
    fn host(&self) -> &str {
        let host = self
            .authority
            .rsplit_once(':')
            .map_or(self.authority.as_str(), |(host, _)| host);
        host.trim_start_matches('[').trim_end_matches(']')
    }
}

/// The TLS client of `https://` receivers, made once: the host's roots, ring as the provider.
fn tls_client() -> Result<Arc<rustls::ClientConfig>, String> {
    static CLIENT: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let trust = cordon_proxy::TrustStore::host().map_err(|e| e.to_string())?;
            let mut roots = rustls::RootCertStore::empty();
            let (_, _) = roots.add_parsable_certificates(trust.roots().iter().cloned());
            if roots.is_empty() {
                return Err("the host's trust store holds no usable certificate".to_owned());
            }
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

/// The signature of `body` sent at `timestamp` with `secret`: `sha256=HEX`.
pub fn signature(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

/// Wakes the sender (a delivery was queued).
#[derive(Debug, Default)]
pub struct Wake {
    queued: Mutex<u64>,
    cvar: Condvar,
}

impl Wake {
    fn notify(&self) {
        *self.queued.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.cvar.notify_all();
    }
}

/// Queues one delivery per webhook of the job's project (none when it has none): called once
/// the job reached its final state.
pub(crate) fn job_ended(service: &Service, id: &JobId) {
    let policy = service.policy();
    let Ok(Some(job)) = service.store.get_job(id) else {
        return;
    };
    let Some((_, rules)) = policy.project(&job.project) else {
        return;
    };
    if rules.webhooks.is_empty() {
        return;
    }
    let hooks: Vec<NewDelivery> = rules
        .webhooks
        .iter()
        .map(|h| NewDelivery {
            url: h.url.clone(),
            secret: h.secret.clone(),
        })
        .collect();
    let body = serde_json::to_string(&JobDocument::from(&job)).unwrap_or_default();
    match service
        .store
        .enqueue_deliveries(&job.id, &job.project, &hooks, &body, MAX_TRIES)
    {
        Ok(_) => service.webhook_wake.notify(),
        Err(error) => eprintln!("cordon: job {}: cannot queue its webhooks: {error}", job.id),
    }
}

/// Starts the sender thread; it stops once `stop` is set.
pub(crate) fn start(service: &Arc<Service>, stop: &Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let (service, stop) = (Arc::clone(service), Arc::clone(stop));
    std::thread::Builder::new()
        .name("cordon-webhooks".into())
        .spawn(move || send_loop(&service, &stop))
        .expect("the webhook sender starts")
}

fn send_loop(service: &Service, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        let seen = *service
            .webhook_wake
            .queued
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match service.store.claim_delivery(LOCK) {
            Ok(Some(delivery)) => {
                deliver(service, &delivery);
                continue;
            }
            Ok(None) => {}
            // An unreachable store is told once per outage (the outage log).
            Err(_) => {}
        }
        let wait = match service.store.next_delivery_at() {
            Ok(Some(at)) => Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0)),
            _ => IDLE,
        }
        .min(IDLE);
        let guard = service
            .webhook_wake
            .queued
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if *guard == seen && !wait.is_zero() {
            let _ = service.webhook_wake.cvar.wait_timeout(guard, wait);
        }
    }
}

/// One try of a delivery, recorded with what follows it.
fn deliver(service: &Service, delivery: &DeliveryRow) {
    let number = delivery.tries + 1;
    let at_ms = now_ms();
    let began = Instant::now();
    let sent = secret_value(service, &delivery.secret)
        .ok_or_else(|| format!("the secret {:?} is not set", delivery.secret))
        .and_then(|secret| post(delivery, &secret));
    let (status, error) = match sent {
        Ok(status) => (Some(status), None),
        Err(error) => (None, Some(error)),
    };
    let verdict = if status.is_some_and(|s| (200..300).contains(&s)) {
        TryVerdict::Delivered
    } else if number >= delivery.max_tries {
        TryVerdict::Failed
    } else {
        let backoff = service
            .retry_backoff
            .saturating_mul(1 << (number - 1).min(10));
        TryVerdict::Retry {
            next_at_ms: now_ms() + i64::try_from(backoff.as_millis()).unwrap_or(i64::MAX),
        }
    };
    let attempt = DeliveryTry {
        number,
        at_ms,
        duration_ms: u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX),
        status,
        error,
    };
    if let Err(error) = service
        .store
        .record_delivery_try(&delivery.id, &attempt, verdict)
    {
        eprintln!(
            "cordon: webhook delivery {}: cannot record its try: {error}",
            delivery.id
        );
    }
}

/// The value of the secret `name`: the secrets file's, else the server's environment's.
fn secret_value(service: &Service, name: &str) -> Option<String> {
    service
        .secrets()
        .pairs()
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var(name).ok())
}

/// POSTs the delivery's body; returns the receiver's status.
fn post(delivery: &DeliveryRow, secret: &str) -> Result<u16, String> {
    let target = Target::parse(&delivery.url)?;
    let address = target
        .authority
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", target.authority))?
        .next()
        .ok_or_else(|| format!("{} resolves to nothing", target.authority))?;
    let stream = TcpStream::connect_timeout(&address, TIMEOUT)
        .map_err(|e| format!("cannot connect to {}: {e}", target.authority))?;
    let _ = stream.set_read_timeout(Some(TIMEOUT));
    let _ = stream.set_write_timeout(Some(TIMEOUT));
    if !target.tls {
        return exchange(stream, &target, delivery, secret);
    }
    let name = rustls::pki_types::ServerName::try_from(target.host().to_owned())
        .map_err(|e| format!("{}: not a host name for TLS: {e}", target.host()))?;
    let connection = rustls::ClientConnection::new(tls_client()?, name)
        .map_err(|e| format!("cannot start TLS with {}: {e}", target.authority))?;
    exchange(
        rustls::StreamOwned::new(connection, stream),
        &target,
        delivery,
        secret,
    )
}

/// Sends the delivery's request over `stream` and reads the receiver's status.
fn exchange(
    mut stream: impl Read + Write,
    target: &Target,
    delivery: &DeliveryRow,
    secret: &str,
) -> Result<u16, String> {
    let timestamp = u64::try_from(now_ms() / 1000).unwrap_or(0);
    let body = delivery.body.as_bytes();
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: cordon/{}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nX-Cordon-Delivery: {}\r\nX-Cordon-Timestamp: {timestamp}\r\n\
         X-Cordon-Signature: {}\r\nConnection: close\r\n\r\n",
        target.path,
        target.authority,
        env!("CARGO_PKG_VERSION"),
        body.len(),
        delivery.id,
        signature(secret.as_bytes(), timestamp, body),
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body))
        .map_err(|e| format!("cannot send: {e}"))?;
    let mut answer = [0u8; 64];
    let mut read = 0;
    while read < 12 {
        match stream.read(&mut answer[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) => return Err(format!("no answer: {e}")),
        }
    }
    let line = String::from_utf8_lossy(&answer[..read]);
    line.strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("the answer is not HTTP: {line:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_http_or_https_with_a_host() {
        assert_eq!(
            Target::parse("http://127.0.0.1:9000/hook?x=1").unwrap(),
            Target {
                authority: "127.0.0.1:9000".into(),
                path: "/hook?x=1".into(),
                tls: false,
            }
        );
        assert_eq!(
            Target::parse("http://hooks.example").unwrap().authority,
            "hooks.example:80"
        );
        let https = Target::parse("https://hooks.example/hook").unwrap();
        assert_eq!(
            (https.authority.as_str(), https.host(), https.tls),
            ("hooks.example:443", "hooks.example", true)
        );
        assert_eq!(Target::parse("https://[::1]:8443/").unwrap().host(), "::1");
        assert!(Target::parse("ftp://hooks.example/").is_err());
        assert!(Target::parse("http://user@hooks.example/").is_err());
        assert!(Target::parse("http:///x").is_err());
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_the_timestamp_and_the_body() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let expected = "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        let body = b"what do ya want for nothing?";
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(body);
        let direct: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(format!("sha256={direct}"), expected);
        // The signed text is `TIMESTAMP.BODY`: another timestamp, another signature.
        assert_ne!(signature(b"Jefe", 1, body), signature(b"Jefe", 2, body));
        assert!(signature(b"Jefe", 1, body).starts_with("sha256="));
    }
}
