//! Why the proxy could not start.

/// The proxy could not be set up; the run must not go on without it.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the network proxy: {what}")]
pub struct ProxyError {
    /// What failed.
    pub what: &'static str,
    /// The system's reason.
    #[source]
    pub source: std::io::Error,
}
