//! How much network a program has, or may have — a job service project's rule, a job's
//! request, an operator's bound on `cordon mcp` — and whether one rule permits another.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How much network a job (or a stage of it) has, or may have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkRule {
    /// Loopback only, in a private network namespace.
    None,
    /// The package registries of the server user's clients, through cordon's proxy.
    Registry,
    /// These host names only (`HOST[:PORT]`, `*.example.org`), through cordon's proxy.
    Allow(Vec<String>),
    /// The host's network.
    Host,
}

impl NetworkRule {
    /// Whether a job under this rule may have `wanted`.
    pub fn permits(&self, wanted: &NetworkRule) -> bool {
        match (self, wanted) {
            (_, NetworkRule::None) | (NetworkRule::Host, _) => true,
            (NetworkRule::Registry, NetworkRule::Registry) => true,
            (NetworkRule::Allow(rules), NetworkRule::Allow(hosts)) => hosts
                .iter()
                .all(|h| rules.iter().any(|r| host_pattern_covers(r, h))),
            _ => false,
        }
    }

    /// The rule's name in messages.
    pub fn describe(&self) -> String {
        match self {
            NetworkRule::None => "none".into(),
            NetworkRule::Registry => "registry".into(),
            NetworkRule::Allow(hosts) => format!("allow {}", hosts.join(", ")),
            NetworkRule::Host => "host".into(),
        }
    }
}

/// Whether the allow-list entry `rule` covers the entry `wanted`: equal (case-insensitive),
/// or `*.domain` covering any name under the domain (and a narrower wildcard), with the
/// same port when the rule names one.
fn host_pattern_covers(rule: &str, wanted: &str) -> bool {
    let split = |entry: &str| -> (String, Option<String>) {
        match entry.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !port.is_empty() => {
                (host.to_ascii_lowercase(), Some(port.to_owned()))
            }
            _ => (entry.to_ascii_lowercase(), None),
        }
    };
    let ((rule_host, rule_port), (host, port)) = (split(rule), split(wanted));
    if rule_port.is_some() && rule_port != port {
        return false;
    }
    if rule_host == host {
        return true;
    }
    match rule_host.strip_prefix("*.") {
        Some(domain) => {
            let bare = host.strip_prefix("*.").unwrap_or(&host);
            bare.len() > domain.len()
                && bare.ends_with(domain)
                && bare.as_bytes()[bare.len() - domain.len() - 1] == b'.'
        }
        None => false,
    }
}
