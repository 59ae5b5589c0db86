//! The host's trust store: the roots the proxy verifies credential hosts against, and that
//! the program's CA bundle carries (beside the run's own authority) for the hosts it reaches
//! through plain tunnels.

use std::path::PathBuf;

use rustls::pki_types::CertificateDer;

use super::InterceptError;
use crate::hooks::TestHooks;

/// Root certificates, as found on the host.
#[derive(Clone)]
pub struct TrustStore {
    roots: Vec<CertificateDer<'static>>,
    /// Where they were read from (for messages).
    source: String,
}

impl std::fmt::Debug for TrustStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustStore")
            .field("roots", &self.roots.len())
            .field("source", &self.source)
            .finish()
    }
}

impl TrustStore {
    /// The host's roots: `SSL_CERT_FILE`/`SSL_CERT_DIR` of cordon's environment, else the
    /// system's bundle (`/etc/ssl/certs/ca-certificates.crt` and the like). In test builds the
    /// test hooks may name a file instead (`trust=PATH`: a test's own authority).
    pub fn host() -> Result<TrustStore, InterceptError> {
        if let Some(path) = TestHooks::from_env().trust {
            return TrustStore::from_pem_file(path);
        }
        let found = rustls_native_certs::load_native_certs();
        if found.certs.is_empty() {
            let why = found
                .errors
                .first()
                .map_or_else(|| "no certificate found".to_owned(), ToString::to_string);
            return Err(InterceptError::Trust(why));
        }
        Ok(TrustStore {
            roots: found.certs,
            source: "the host's trust store".into(),
        })
    }

    /// The certificates of a PEM file.
    pub fn from_pem_file(path: PathBuf) -> Result<TrustStore, InterceptError> {
        let text = std::fs::read(&path)
            .map_err(|e| InterceptError::Trust(format!("{}: {e}", path.display())))?;
        let roots: Vec<CertificateDer<'static>> = pem::parse_many(&text)
            .map_err(|e| InterceptError::Trust(format!("{}: {e}", path.display())))?
            .into_iter()
            .filter(|p| p.tag() == "CERTIFICATE")
            .map(|p| CertificateDer::from(p.into_contents()))
            .collect();
        if roots.is_empty() {
            return Err(InterceptError::Trust(format!(
                "{}: no certificate in it",
                path.display()
            )));
        }
        Ok(TrustStore {
            roots,
            source: path.display().to_string(),
        })
    }

    /// The roots.
    pub fn roots(&self) -> &[CertificateDer<'static>] {
        &self.roots
    }

    /// The roots as PEM text.
    pub fn pem(&self) -> String {
        self.roots
            .iter()
            .map(|der| pem::encode(&pem::Pem::new("CERTIFICATE", der.to_vec())))
            .collect()
    }
}
