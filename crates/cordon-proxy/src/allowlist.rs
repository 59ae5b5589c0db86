//! The host allowlist: `HOST[:PORT]` rules, `*.example.org` wildcards.

use crate::host::{self, HostName};

/// The ports a rule without one allows: HTTP and HTTPS.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// The destinations a program may reach through the proxy, by host name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    rules: Vec<HostRule>,
}

/// One allowlist rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// The name (lowercase), or for a wildcard the suffix after `*.`.
    name: String,
    /// Whether the rule is `*.name` (any name below `name`, not `name` itself).
    wildcard: bool,
    /// The one port allowed; `None`: [`DEFAULT_PORTS`].
    port: Option<u16>,
}

/// A rule that cannot be part of an allowlist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid network allowlist entry {entry:?}: {reason}")]
pub struct AllowlistError {
    /// The entry as given.
    pub entry: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl HostRule {
    /// Parses `HOST`, `HOST:PORT`, `*.DOMAIN` or `*.DOMAIN:PORT`.
    pub fn parse(entry: &str) -> Result<Self, AllowlistError> {
        let fail = |reason| AllowlistError {
            entry: entry.to_owned(),
            reason,
        };
        let (host_part, port) = match entry.rsplit_once(':') {
            Some((h, p)) => {
                let port: u16 = p
                    .parse()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| fail("the port is not a number from 1 to 65535"))?;
                (h, Some(port))
            }
            None => (entry, None),
        };
        let (wildcard, name) = match host_part.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host_part),
        };
        match host::judge(name) {
            HostName::Name(name) if wildcard && !name.contains('.') => Err(fail(
                "a wildcard must name a domain with a dot (`*.example.org`)",
            )),
            HostName::Name(name) => Ok(HostRule {
                name,
                wildcard,
                port,
            }),
            HostName::Literal => Err(fail(
                "an IP address: the allowlist names hosts (their addresses are checked on every connection)",
            )),
            HostName::Invalid => Err(fail("not a host name")),
        }
    }

    /// Whether this rule allows `host` (a judged, lowercase name) on `port`.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        };
        let name_ok = if self.wildcard {
            host.strip_suffix(self.name.as_str())
                .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.'))
        } else {
            host == self.name
        };
        port_ok && name_ok
    }
}

impl std::fmt::Display for HostRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.wildcard {
            f.write_str("*.")?;
        }
        f.write_str(&self.name)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

impl Allowlist {
    /// Parses a list of rules (see [`HostRule::parse`]); duplicates are kept once.
    pub fn parse<I, S>(entries: I) -> Result<Self, AllowlistError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut list = Allowlist::default();
        for entry in entries {
            let rule = HostRule::parse(entry.as_ref().trim())?;
            if !list.rules.contains(&rule) {
                list.rules.push(rule);
            }
        }
        Ok(list)
    }

    /// Adds the rules of `other` not already present.
    pub fn extend(&mut self, other: &Allowlist) {
        for rule in &other.rules {
            if !self.rules.contains(rule) {
                self.rules.push(rule.clone());
            }
        }
    }

    /// Whether a program may reach `host` (a judged, lowercase name) on `port`.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.rules.iter().any(|r| r.allows(host, port))
    }

    /// The rules, as they would be written.
    pub fn entries(&self) -> Vec<String> {
        self.rules.iter().map(ToString::to_string).collect()
    }

    /// Whether the list allows nothing.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_names_wildcards_and_ports() {
        let list = Allowlist::parse([
            "index.crates.io",
            "*.example.org:8443",
            "Static.Rust-Lang.org.",
        ])
        .unwrap();
        assert_eq!(
            list.entries(),
            [
                "index.crates.io",
                "*.example.org:8443",
                "static.rust-lang.org"
            ]
        );
        assert!(list.allows("index.crates.io", 443));
        assert!(list.allows("index.crates.io", 80));
        assert!(!list.allows("index.crates.io", 22));
        assert!(!list.allows("evil.index.crates.io", 443));
        assert!(!list.allows("index.crates.io.evil.example", 443));
        assert!(list.allows("a.example.org", 8443));
        assert!(list.allows("a.b.example.org", 8443));
        assert!(!list.allows("example.org", 8443));
        assert!(!list.allows("badexample.org", 8443));
        assert!(!list.allows("a.example.org", 443));
        assert!(list.allows("static.rust-lang.org", 443));
    }

    #[test]
    fn bad_rules_are_refused() {
        for bad in [
            "10.0.0.1",
            "[::1]:443",
            "*",
            "*.org",
            "a.example:0",
            "a.example:x",
            "",
            "a b",
        ] {
            assert!(Allowlist::parse([bad]).is_err(), "{bad:?}");
        }
    }
}
