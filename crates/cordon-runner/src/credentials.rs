//! A run's credentials (`--credential`): their values looked up on the host side, a
//! placeholder for the program in their place, the run's certificate authority and the CA
//! bundle the program trusts.

use std::path::{Path, PathBuf};

use cordon_proxy::{HeldCredential, Interception, ProxySettings, TrustStore, placeholder};

use crate::error::{RunError, RunErrorKind};
use crate::run_files::RunFiles;

/// The run's CA bundle, in a host directory of the run's own (`$CORDON_HOME/run/<pid>-ca-…`,
/// removed with the run, or by the next cordon when this one was killed).
pub(crate) struct CaBundle {
    /// Held for its drop, which removes the directory.
    _dir: RunFiles,
    path: PathBuf,
}

impl CaBundle {
    fn write(pem: &str) -> std::io::Result<CaBundle> {
        let dir = RunFiles::make("ca")?;
        let path = dir.path().join("ca-bundle.pem");
        std::fs::write(&path, pem)?;
        Ok(CaBundle { _dir: dir, path })
    }

    /// Where the bundle is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// What a run with credentials holds.
pub(crate) struct RunCredentials {
    /// The credentials with their values and the run's authority, for the proxy.
    pub(crate) interception: Interception,
    /// The CA bundle the sandbox shows the program (removed with the run).
    pub(crate) bundle: CaBundle,
    /// The program's variables: each credential's name with its placeholder.
    pub(crate) placeholders: Vec<(String, String)>,
    /// Each credential's name and value, redacted from everything the run shows or keeps.
    pub(crate) values: Vec<(String, String)>,
}

/// Looks up the values of `settings.credentials` (in `provided`, the caller's secrets, then in
/// `host`, cordon's environment) and makes the run's authority; `None` without credentials.
pub(crate) fn prepare(
    settings: &ProxySettings,
    secrets: &[String],
    provided: &[(String, String)],
    host: &[(String, String)],
) -> Result<Option<RunCredentials>, RunError> {
    if settings.credentials.is_empty() {
        return Ok(None);
    }
    settings.check_credentials()?;
    let mut held = Vec::new();
    let mut placeholders: Vec<(String, String)> = Vec::new();
    let mut values = Vec::new();
    for rule in &settings.credentials {
        if secrets.contains(&rule.name) {
            return Err(RunErrorKind::CredentialAsSecret(rule.name.clone()).into());
        }
        let value = provided
            .iter()
            .chain(host)
            .find(|(k, _)| *k == rule.name)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| RunErrorKind::MissingCredential(rule.name.clone()))?;
        if !placeholders.iter().any(|(name, _)| *name == rule.name) {
            placeholders.push((rule.name.clone(), placeholder(placeholders.len())));
            values.push((rule.name.clone(), value.clone()));
        }
        held.push(HeldCredential::new(rule.clone(), value)?);
    }
    let trust = TrustStore::host()?;
    let interception = Interception::new(held, &trust)?;
    let bundle = CaBundle::write(interception.ca_bundle())
        .map_err(|e| RunError::from(RunErrorKind::CaBundle(e)))?;
    Ok(Some(RunCredentials {
        interception,
        bundle,
        placeholders,
        values,
    }))
}
