//! Credentials added on the way out: the proxy terminates the program's TLS to a credential
//! host with the run's own certificate authority, speaks TLS to the real server (verified
//! against the host's trust store), adds the credential's header to every request and hides
//! the credential in what comes back.

mod authority;
mod mask;
mod rewrite;
mod session;
mod trust;

use std::sync::Arc;

use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;

pub(crate) use session::{Refused, intercept};
pub use trust::TrustStore;

use crate::credential::HeldCredential;
use authority::RunAuthority;
use mask::Needles;

/// Why credentials cannot be added in this run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InterceptError {
    /// The host's roots cannot be read.
    #[error("cannot read the host's trust store: {0}")]
    Trust(String),
    /// The run's authority (or a host's certificate) cannot be made.
    #[error("cannot make the run's certificate authority: {0}")]
    Authority(String),
}

/// What one run's proxy needs to add credentials: the credentials with their values, the
/// run's authority (its key only in memory), the TLS configuration towards the real servers.
/// Its `Debug` form shows no value.
pub struct Interception {
    credentials: Vec<HeldCredential>,
    authority: RunAuthority,
    provider: Arc<CryptoProvider>,
    client: Arc<ClientConfig>,
    bundle: String,
    needles: Option<Needles>,
}

impl std::fmt::Debug for Interception {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interception")
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl Interception {
    /// Makes the run's authority (a fresh key) for the hosts of `credentials`, and the
    /// configuration that verifies their servers against `trust`.
    pub fn new(
        credentials: Vec<HeldCredential>,
        trust: &TrustStore,
    ) -> Result<Interception, InterceptError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut hosts: Vec<&str> = credentials.iter().map(|c| c.rule.host.as_str()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        let authority = RunAuthority::new(&hosts)?;
        let mut roots = rustls::RootCertStore::empty();
        let (added, _ignored) = roots.add_parsable_certificates(trust.roots().iter().cloned());
        if added == 0 {
            return Err(InterceptError::Trust("no usable root certificate".into()));
        }
        let mut client = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| InterceptError::Authority(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        let bundle = format!("{}{}", trust.pem(), authority.pem());
        let needles = Needles::new(credentials.iter().flat_map(HeldCredential::revealing));
        Ok(Interception {
            credentials,
            authority,
            provider,
            client: Arc::new(client),
            bundle,
            needles,
        })
    }

    /// The certificate authorities the program must trust, PEM: the host's roots (for the
    /// hosts it reaches through plain tunnels) and the run's authority (for the credential
    /// hosts). Public; the authority's key never leaves cordon's memory.
    pub fn ca_bundle(&self) -> &str {
        &self.bundle
    }

    /// The run's authority alone, PEM.
    pub fn authority_pem(&self) -> &str {
        self.authority.pem()
    }

    /// The credentials.
    pub fn credentials(&self) -> &[HeldCredential] {
        &self.credentials
    }

    /// The credentials that go to `host` (judged, lowercase) on `port`.
    pub(crate) fn for_host(&self, host: &str, port: u16) -> Vec<&HeldCredential> {
        self.credentials
            .iter()
            .filter(|c| c.rule.applies_to(host, port))
            .collect()
    }
}
