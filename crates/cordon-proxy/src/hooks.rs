//! Test-only hooks: a resolver override and a switch permitting loopback destinations, so
//! that tests can serve "allowed hosts" on loopback and make listed names resolve to
//! private addresses; and a file of root certificates standing for the host's trust store,
//! so that tests can serve credential hosts over HTTPS with an authority of their own.
//!
//! They exist only when the crate is built with the `test-hooks` feature, which only
//! test builds turn on (the `cordon` CLI's dev-dependency; cargo resolves dev-dependency
//! features only when it builds tests, so `cargo build`/`cargo install` binaries never contain
//! this code), and even then only when `CORDON_TEST_NETWORK_HOOKS` is set in cordon's own
//! environment (never the program's: the proxy runs outside the sandbox, and the program's
//! environment is built from an allow-list). No flag, configuration file or policy field
//! reaches them.
//!
//! Format: `;`-separated items, `loopback` (permit 127.0.0.0/8 and ::1 destinations),
//! `trust=PATH` (the roots in this PEM file instead of the host's trust store) and
//! `NAME=IP[,IP...]` (resolve NAME to these addresses instead of asking DNS).

use std::net::IpAddr;
use std::path::PathBuf;

/// The environment variable holding the hooks (test builds only).
pub const HOOKS_ENV: &str = "CORDON_TEST_NETWORK_HOOKS";

/// What the tests changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestHooks {
    /// Whether loopback destinations are permitted.
    pub allow_loopback: bool,
    /// Names resolved without DNS.
    pub resolve: Vec<(String, Vec<IpAddr>)>,
    /// A PEM file of roots standing for the host's trust store.
    pub trust: Option<PathBuf>,
}

impl TestHooks {
    /// The hooks from cordon's environment; none unless this is a test build.
    pub fn from_env() -> Self {
        #[cfg(any(test, feature = "test-hooks"))]
        if let Ok(text) = std::env::var(HOOKS_ENV) {
            return Self::parse(&text);
        }
        Self::default()
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn parse(text: &str) -> Self {
        let mut hooks = Self::default();
        for item in text.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            if item == "loopback" {
                hooks.allow_loopback = true;
            } else if let Some(path) = item.strip_prefix("trust=") {
                hooks.trust = Some(PathBuf::from(path));
            } else if let Some((name, ips)) = item.split_once('=') {
                let ips = ips.split(',').filter_map(|ip| ip.trim().parse().ok());
                hooks
                    .resolve
                    .push((name.trim().to_ascii_lowercase(), ips.collect()));
            }
        }
        hooks
    }

    /// The addresses a test assigned to `host`, if any.
    pub fn resolved(&self, host: &str) -> Option<&[IpAddr]> {
        self.resolve
            .iter()
            .find(|(name, _)| name == host)
            .map(|(_, ips)| ips.as_slice())
    }

    /// Whether `ip` is a loopback address the tests permitted.
    pub fn permits(&self, ip: IpAddr) -> bool {
        self.allow_loopback && ip.is_loopback()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_parse() {
        let h = TestHooks::parse("loopback; A.test=127.0.0.1,::1 ;b.test=10.0.0.1;trust=/t/ca.pem");
        assert!(h.allow_loopback);
        assert_eq!(h.trust, Some(PathBuf::from("/t/ca.pem")));
        assert_eq!(h.resolved("a.test").unwrap().len(), 2);
        assert_eq!(
            h.resolved("b.test").unwrap(),
            ["10.0.0.1".parse::<IpAddr>().unwrap()]
        );
        assert!(h.resolved("c.test").is_none());
    }
}
