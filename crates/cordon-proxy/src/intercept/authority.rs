//! The run's certificate authority: made in memory when a run with credentials starts (a
//! fresh key every run, never written anywhere), valid for a few days, allowed by its name
//! constraints to sign only for the credential hosts; it signs one certificate per host as
//! the program first reaches it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    GeneralSubtree, IsCa, Issuer, KeyPair, KeyUsagePurpose, NameConstraints, SanType,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::InterceptError;

/// How long before now the certificates are valid (clocks differ a little).
const BACKDATE: Duration = Duration::from_secs(3600);
/// How long after now they stay valid (longer than any run).
const VALIDITY: Duration = Duration::from_secs(7 * 24 * 3600);

/// The authority and the certificates it made.
pub(crate) struct RunAuthority {
    /// The authority's certificate (PEM), for the program's bundle.
    pem: String,
    /// Signs the hosts' certificates.
    issuer: Issuer<'static, KeyPair>,
    /// The key of every host certificate of this run.
    leaf_key: KeyPair,
    /// The server side of the TLS the program speaks, per host.
    configs: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

fn failed(what: &'static str) -> impl FnOnce(rcgen::Error) -> InterceptError {
    move |e| InterceptError::Authority(format!("{what}: {e}"))
}

impl RunAuthority {
    /// A new authority that may sign for `hosts` only.
    pub(crate) fn new(hosts: &[&str]) -> Result<RunAuthority, InterceptError> {
        let key = KeyPair::generate().map_err(failed("generate its key"))?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, "cordon run authority");
        name.push(DnType::OrganizationName, "cordon");
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.name_constraints = Some(NameConstraints {
            permitted_subtrees: hosts
                .iter()
                .map(|h| GeneralSubtree::DnsName((*h).to_owned()))
                .collect(),
            excluded_subtrees: Vec::new(),
        });
        validity(&mut params);
        let cert = params
            .self_signed(&key)
            .map_err(failed("sign its certificate"))?;
        let leaf_key = KeyPair::generate().map_err(failed("generate the hosts' key"))?;
        Ok(RunAuthority {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
            leaf_key,
            configs: Mutex::new(HashMap::new()),
        })
    }

    /// The authority's certificate, PEM.
    pub(crate) fn pem(&self) -> &str {
        &self.pem
    }

    /// The TLS server configuration presenting a certificate for `host` (made once per run).
    pub(crate) fn server_config(
        &self,
        host: &str,
        provider: &Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Arc<ServerConfig>, InterceptError> {
        let mut configs = self
            .configs
            .lock()
            .map_err(|_| InterceptError::Authority("a thread panicked".into()))?;
        if let Some(config) = configs.get(host) {
            return Ok(Arc::clone(config));
        }
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, host);
        params.distinguished_name = name;
        params.subject_alt_names = vec![SanType::DnsName(
            host.to_owned()
                .try_into()
                .map_err(failed("name the host"))?,
        )];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        validity(&mut params);
        let cert = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(failed("sign a host's certificate"))?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
        let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
        let mut config = ServerConfig::builder_with_provider(Arc::clone(provider))
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
            .map_err(|e| InterceptError::Authority(format!("set up TLS for {host}: {e}")))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        configs.insert(host.to_owned(), Arc::clone(&config));
        Ok(config)
    }
}

fn validity(params: &mut CertificateParams) {
    let now = SystemTime::now();
    params.not_before = (now - BACKDATE).into();
    params.not_after = (now + VALIDITY).into();
}
