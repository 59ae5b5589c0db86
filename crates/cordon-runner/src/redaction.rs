//! One redaction rule for every run.

use cordon_redact::{Redactor, RedactorBuilder};
use cordon_sandbox::EnvVar;

use crate::error::RunError;

/// Redaction asked for by the caller beyond the defaults (e.g. `[redact]` of `cordon.toml`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedactRules {
    /// Regular expressions whose matches are hidden (named `pattern-1`, `pattern-2`, …).
    pub patterns: Vec<String>,
    /// Literal values that are never redacted (e.g. a public test key that looks secret).
    pub allow: Vec<String>,
}

/// The redactor of one run: the values of the program's secrets, every secret-looking
/// variable (`*TOKEN*`, `*SECRET*`, `*KEY*`, …) of cordon's own environment (`host`) and of
/// the program's (`program`), every value the caller holds as a secret (`held`, whether or
/// not the program receives it), the built-in token patterns, and `rules`.
///
/// cordon's own secret-looking values are redacted whether or not the program receives
/// them: a program may find them elsewhere (a file, a socket) and print them.
pub fn build_redactor<K, V>(
    host: impl IntoIterator<Item = (K, V)>,
    program: &[EnvVar],
    held: &[(String, String)],
    rules: &RedactRules,
) -> Result<Redactor, RunError>
where
    K: AsRef<std::ffi::OsStr>,
    V: AsRef<std::ffi::OsStr>,
{
    let mut builder = RedactorBuilder::new();
    builder.add_env(host);
    for var in program.iter().filter(|v| v.secret) {
        builder.add_secret(&var.name, &var.value);
    }
    for (name, value) in held {
        builder.add_secret(name, value);
    }
    builder.add_env(program.iter().map(|v| (&v.name, &v.value)));
    for (i, pattern) in rules.patterns.iter().enumerate() {
        builder.add_pattern(format!("pattern-{}", i + 1), pattern);
    }
    for literal in &rules.allow {
        builder.allow(literal);
    }
    Ok(builder.build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str, value: &str, secret: bool) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: value.into(),
            secret,
        }
    }

    #[test]
    fn hides_host_and_program_secrets_patterns_and_respects_the_allow_list() {
        let host = [("GITHUB_TOKEN", "host-token-value-1234")];
        let program = [
            var("NAMED", "named-secret-value-5678", true),
            var("API_KEY", "program-key-value-9012", false),
            var("PLAIN", "plain-value-3456", false),
        ];
        let rules = RedactRules {
            patterns: vec!["internal-[0-9]{6}".into()],
            allow: vec!["program-key-value-9012".into()],
        };
        let r = build_redactor(host, &program, &[], &rules).unwrap();
        let out = String::from_utf8(r.redact_all(
            b"host-token-value-1234 named-secret-value-5678 program-key-value-9012 \
              plain-value-3456 internal-123456",
        ))
        .unwrap();
        assert!(!out.contains("host-token-value-1234"), "{out}");
        assert!(!out.contains("named-secret-value-5678"), "{out}");
        assert!(out.contains("program-key-value-9012"), "{out}");
        assert!(out.contains("plain-value-3456"), "{out}");
        assert!(out.contains("[REDACTED:pattern-1]"), "{out}");
    }

    #[test]
    fn a_bad_pattern_is_an_error_with_a_hint() {
        let rules = RedactRules {
            patterns: vec!["(".into()],
            allow: vec![],
        };
        let err = build_redactor(Vec::<(String, String)>::new(), &[], &[], &rules).unwrap_err();
        assert!(err.hint().is_some_and(|h| h.contains("pattern-1")), "{err}");
    }
}
