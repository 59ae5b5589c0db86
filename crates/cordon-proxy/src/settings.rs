//! The proxy's settings: what it allows and how far.

use std::time::Duration;

use crate::allowlist::Allowlist;
use crate::credential::{Credential, CredentialError, CredentialErrorKind};

/// Bytes a run may move through the proxy by default (both directions): 2 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;
/// Connections a run may open through the proxy by default.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 1024;
/// Connections open at once; more are refused until one ends.
pub const MAX_OPEN_CONNECTIONS: usize = 64;

/// What the proxy of one run allows, and its bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxySettings {
    /// The hosts a program may reach.
    pub allow: Allowlist,
    /// The most bytes (sent and received together) per run; past it connections are cut.
    pub max_bytes: u64,
    /// The most connections per run; later ones are refused.
    pub max_connections: u64,
    /// A connection with no byte moving either way for this long is closed.
    pub idle_timeout: Duration,
    /// The time a program has to send a complete request head (slow-header defence).
    pub head_timeout: Duration,
    /// The time to connect to a destination.
    pub connect_timeout: Duration,
    /// Credentials the proxy adds to requests to their hosts (over HTTPS, which it then
    /// terminates); the values are looked up when the run starts.
    pub credentials: Vec<Credential>,
}

impl ProxySettings {
    /// Refuses a credential whose host the allowlist does not let the program reach.
    pub fn check_credentials(&self) -> Result<(), CredentialError> {
        for c in &self.credentials {
            if !self.allow.allows(&c.host, c.port) {
                return Err(CredentialError {
                    spec: c.to_string(),
                    kind: CredentialErrorKind::NotAllowed {
                        host: c.host.clone(),
                        port: c.port,
                    },
                });
            }
        }
        Ok(())
    }
}

impl Default for ProxySettings {
    fn default() -> Self {
        ProxySettings {
            allow: Allowlist::default(),
            max_bytes: DEFAULT_MAX_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: Duration::from_secs(60),
            head_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            credentials: Vec::new(),
        }
    }
}
