//! Credentials the proxy adds on the way out: `HOST[:PORT]=NAME[:HOW]` rules, and a rule
//! with its value (held by cordon, never given to the program).

use std::fmt;

use base64::Engine as _;

use crate::host::{self, HostName};

/// The port a credential's host gets its credential on when the rule names none: HTTPS.
pub const CREDENTIAL_DEFAULT_PORT: u16 = 443;

/// What the program sees in its environment instead of the credential with this index (from
/// 0): `cordon-credential-1`, `cordon-credential-2`, …
pub fn placeholder(index: usize) -> String {
    format!("cordon-credential-{}", index + 1)
}

/// One `--credential HOST[:PORT]=NAME[:HOW]` rule: which host gets which value, and how it
/// is added to its requests. The value is not part of it (see [`HeldCredential`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The host (lowercase) whose requests carry it.
    pub host: String,
    /// The port of that host ([`CREDENTIAL_DEFAULT_PORT`] unless the rule names one).
    pub port: u16,
    /// The host-side variable (or secrets-file entry) holding the value; the program's
    /// variable of the same name holds the placeholder.
    pub name: String,
    /// How the value is added.
    pub how: Injection,
}

/// How a credential is added to a request: one header, set by the proxy (a header of that
/// name the program sent is dropped first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Injection {
    /// `header:NAME:TEMPLATE`: the header `NAME` with `{}` in `TEMPLATE` replaced by the value
    /// (`header:Authorization:Bearer {}`, the default, or `header:x-api-key:{}`).
    Header {
        /// The header's name, as given.
        name: String,
        /// The header's value with `{}` where the credential goes.
        template: String,
    },
    /// `basic:USER:{}`: HTTP basic authentication, `USER` and the value as the password
    /// (git over HTTPS, registries).
    Basic {
        /// The user name.
        user: String,
    },
}

impl Injection {
    /// The default: `Authorization: Bearer VALUE` (API keys).
    pub fn bearer() -> Self {
        Injection::Header {
            name: "Authorization".into(),
            template: "Bearer {}".into(),
        }
    }

    /// The name of the header it sets.
    pub fn header_name(&self) -> &str {
        match self {
            Injection::Header { name, .. } => name,
            Injection::Basic { .. } => "Authorization",
        }
    }
}

/// A credential rule that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid credential {spec:?}: {kind}")]
pub struct CredentialError {
    /// The rule as given (`HOST=SPEC`); never holds a value.
    pub spec: String,
    /// What is wrong with it.
    #[source]
    pub kind: CredentialErrorKind,
}

/// What is wrong with a credential rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialErrorKind {
    /// Not `HOST=NAME[:HOW]`.
    #[error("expected HOST[:PORT]=NAME[:HOW], e.g. api.example.com=API_KEY")]
    Shape,
    /// The host part is not a host name (IP addresses and wildcards are refused).
    #[error("{0:?} is not a host name (a credential names one host, no wildcard or IP address)")]
    Host(String),
    /// The port is not a number from 1 to 65535.
    #[error("the port is not a number from 1 to 65535")]
    Port,
    /// The variable name is empty or has characters no variable name has.
    #[error("{0:?} is not a variable name (letters, digits and _)")]
    Name(String),
    /// `HOW` is not one of the known ways.
    #[error(
        "{0:?} is not a way to add it: header:NAME:TEMPLATE (with {{}} once in TEMPLATE) or basic:USER:{{}}"
    )]
    How(String),
    /// The header is one the proxy must control (framing, routing).
    #[error("the header {0:?} cannot carry a credential")]
    ReservedHeader(String),
    /// The host is not on the network allowlist.
    #[error(
        "{host}:{port} is not on the network allowlist (a credential goes only to a host the program may reach)"
    )]
    NotAllowed {
        /// The host.
        host: String,
        /// The port.
        port: u16,
    },
    /// The value cannot go in a header (a line break or another control character).
    #[error(
        "the value of {0} has a control character or a line break, which a header cannot carry"
    )]
    BadValue(String),
}

/// Headers a credential may not set: the proxy and the server rely on them for framing and
/// routing.
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "expect",
];

impl Credential {
    /// Parses `HOST[:PORT]=NAME[:HOW]`, where `HOW` is `header:NAME:TEMPLATE` (with `{}` once
    /// in `TEMPLATE`) or `basic:USER:{}`; without it, `header:Authorization:Bearer {}`.
    pub fn parse(spec: &str) -> Result<Self, CredentialError> {
        let fail = |kind| CredentialError {
            spec: spec.to_owned(),
            kind,
        };
        let (target, rest) = spec
            .split_once('=')
            .ok_or_else(|| fail(CredentialErrorKind::Shape))?;
        let (host_text, port) = match target.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| fail(CredentialErrorKind::Port))?,
            ),
            None => (target, CREDENTIAL_DEFAULT_PORT),
        };
        let host = match host::judge(host_text) {
            HostName::Name(name) if !host_text.starts_with("*.") => name,
            _ => return Err(fail(CredentialErrorKind::Host(host_text.to_owned()))),
        };
        let (name, how) = match rest.split_once(':') {
            Some((name, how)) => (name, Some(how)),
            None => (rest, None),
        };
        let name_ok = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit();
        if !name_ok {
            return Err(fail(CredentialErrorKind::Name(name.to_owned())));
        }
        let how = match how {
            None => Injection::bearer(),
            Some(how) => parse_how(how).map_err(fail)?,
        };
        Ok(Credential {
            host,
            port,
            name: name.to_owned(),
            how,
        })
    }

    /// Whether this credential goes to `host` (judged, lowercase) on `port`.
    pub fn applies_to(&self, host: &str, port: u16) -> bool {
        self.host == host && self.port == port
    }
}

fn parse_how(how: &str) -> Result<Injection, CredentialErrorKind> {
    let bad = || CredentialErrorKind::How(how.to_owned());
    let mut parts = how.splitn(3, ':');
    let (kind, first, rest) = (parts.next(), parts.next(), parts.next());
    match (kind, first, rest) {
        (Some("header"), Some(name), Some(template)) => {
            let token = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                return Err(bad());
            }
            if RESERVED.iter().any(|r| name.eq_ignore_ascii_case(r)) {
                return Err(CredentialErrorKind::ReservedHeader(name.to_owned()));
            }
            if template.matches("{}").count() != 1 || template.chars().any(char::is_control) {
                return Err(bad());
            }
            Ok(Injection::Header {
                name: name.to_owned(),
                template: template.to_owned(),
            })
        }
        (Some("basic"), Some(user), Some("{}"))
            if !user.contains(':') && !user.chars().any(char::is_control) =>
        {
            Ok(Injection::Basic {
                user: user.to_owned(),
            })
        }
        _ => Err(bad()),
    }
}

impl fmt::Display for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.host)?;
        if self.port != CREDENTIAL_DEFAULT_PORT {
            write!(f, ":{}", self.port)?;
        }
        write!(f, "={}", self.name)?;
        match &self.how {
            Injection::Header { name, template } => write!(f, ":header:{name}:{template}"),
            Injection::Basic { user } => write!(f, ":basic:{user}:{{}}"),
        }
    }
}

/// A credential rule with its value: what the proxy adds. Its `Debug` form hides the value.
#[derive(Clone, PartialEq, Eq)]
pub struct HeldCredential {
    /// The rule.
    pub rule: Credential,
    /// The value.
    value: String,
    /// The header's value: the template filled in, or `Basic base64(user:value)`.
    header_value: String,
}

impl fmt::Debug for HeldCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldCredential")
            .field("rule", &self.rule)
            .field("value", &"<secret>")
            .finish()
    }
}

impl HeldCredential {
    /// The rule with its value; refused when the value cannot go in a header.
    pub fn new(rule: Credential, value: impl Into<String>) -> Result<Self, CredentialError> {
        let value = value.into();
        if value.is_empty() || value.chars().any(char::is_control) {
            return Err(CredentialError {
                spec: rule.to_string(),
                kind: CredentialErrorKind::BadValue(rule.name.clone()),
            });
        }
        let header_value = match &rule.how {
            Injection::Header { template, .. } => template.replacen("{}", &value, 1),
            Injection::Basic { user } => format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{value}"))
            ),
        };
        Ok(HeldCredential {
            rule,
            value,
            header_value,
        })
    }

    /// The value itself.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The header as the proxy adds it: `(name, value)`.
    pub fn header(&self) -> (&str, &str) {
        (self.rule.how.header_name(), &self.header_value)
    }

    /// The byte strings that reveal the credential when a response echoes them (the value,
    /// and the header's value when it encodes it).
    pub fn revealing(&self) -> Vec<&str> {
        let mut out = vec![self.value.as_str()];
        if let Injection::Basic { .. } = self.rule.how {
            let token = self.header_value.trim_start_matches("Basic ");
            out.push(token);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_with_their_defaults_and_print_back() {
        let c = Credential::parse("API.example.com=OPENAI_API_KEY").unwrap();
        assert_eq!(
            c,
            Credential {
                host: "api.example.com".into(),
                port: 443,
                name: "OPENAI_API_KEY".into(),
                how: Injection::bearer(),
            }
        );
        assert_eq!(
            c.to_string(),
            "api.example.com=OPENAI_API_KEY:header:Authorization:Bearer {}"
        );
        let c = Credential::parse("git.example:8443=TOKEN:basic:x-access-token:{}").unwrap();
        assert_eq!((c.port, c.how.header_name()), (8443, "Authorization"));
        assert_eq!(
            c.to_string(),
            "git.example:8443=TOKEN:basic:x-access-token:{}"
        );
        let c = Credential::parse("a.example=K:header:x-api-key:{}").unwrap();
        assert_eq!(Credential::parse(&c.to_string()).unwrap(), c);
        let c = Credential::parse("a.example=K:header:X-Key:v1:{}:z").unwrap();
        assert_eq!(
            c.how,
            Injection::Header {
                name: "X-Key".into(),
                template: "v1:{}:z".into()
            }
        );
    }

    #[test]
    fn bad_rules_are_refused_with_the_reason() {
        let kind = |spec: &str| Credential::parse(spec).unwrap_err().kind;
        assert_eq!(kind("api.example.com"), CredentialErrorKind::Shape);
        assert!(matches!(kind("10.0.0.1=K"), CredentialErrorKind::Host(_)));
        assert!(matches!(
            kind("*.example.com=K"),
            CredentialErrorKind::Host(_)
        ));
        assert_eq!(kind("a.example:0=K"), CredentialErrorKind::Port);
        assert!(matches!(kind("a.example=1K"), CredentialErrorKind::Name(_)));
        assert!(matches!(kind("a.example="), CredentialErrorKind::Name(_)));
        assert!(matches!(
            kind("a.example=K:header:X"),
            CredentialErrorKind::How(_)
        ));
        assert!(matches!(
            kind("a.example=K:header:X:v"),
            CredentialErrorKind::How(_)
        ));
        assert!(matches!(
            kind("a.example=K:header:X:{}{}"),
            CredentialErrorKind::How(_)
        ));
        assert!(matches!(
            kind("a.example=K:header:X Y:{}"),
            CredentialErrorKind::How(_)
        ));
        assert!(matches!(
            kind("a.example=K:basic:u:p"),
            CredentialErrorKind::How(_)
        ));
        assert!(matches!(
            kind("a.example=K:digest:u:{}"),
            CredentialErrorKind::How(_)
        ));
        assert_eq!(
            kind("a.example=K:header:Host:{}"),
            CredentialErrorKind::ReservedHeader("Host".into())
        );
    }

    #[test]
    fn a_held_credential_fills_its_header_and_hides_its_value() {
        let rule = Credential::parse("a.example=T:basic:x-access-token:{}").unwrap();
        let held = HeldCredential::new(rule, "s3cr3t").unwrap();
        assert_eq!(
            held.header(),
            ("Authorization", "Basic eC1hY2Nlc3MtdG9rZW46czNjcjN0")
        );
        assert_eq!(held.revealing(), ["s3cr3t", "eC1hY2Nlc3MtdG9rZW46czNjcjN0"]);
        assert!(!format!("{held:?}").contains("s3cr3t"));
        let rule = Credential::parse("a.example=T").unwrap();
        assert_eq!(
            HeldCredential::new(rule.clone(), "k").unwrap().header(),
            ("Authorization", "Bearer k")
        );
        let err = HeldCredential::new(rule, "k\r\nX-Evil: 1").unwrap_err();
        assert_eq!(err.kind, CredentialErrorKind::BadValue("T".into()));
        assert!(!err.to_string().contains("Evil"));
    }
}
