//! Errors and warnings raised while building a [`Redactor`](crate::Redactor).

/// Why a [`Redactor`](crate::Redactor) could not be built.
///
/// Every variant names the secret or pattern it is about, so the message can
/// be shown as is. [`RedactError::hint`] suggests a fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedactError {
    /// A user pattern is not a valid regular expression, or is too big to
    /// compile.
    #[error("invalid redaction pattern `{name}`")]
    InvalidPattern {
        /// The pattern's name, as given to `add_pattern`.
        name: String,
        /// What the regex compiler said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A user pattern can match the empty string, which would redact nothing
    /// and everything at once.
    #[error("redaction pattern `{name}` can match the empty string")]
    EmptyMatch {
        /// The pattern's name.
        name: String,
    },
    /// A pattern was given a maximum match length of zero.
    #[error("redaction pattern `{name}` has a maximum match length of 0")]
    ZeroMaxLen {
        /// The pattern's name.
        name: String,
    },
    /// A secret was asked for by name (`--secret NAME`) but the environment
    /// has no such variable. Failing closed: the user expected it redacted.
    #[error("secret `{name}` is not set in the environment")]
    MissingSecret {
        /// The environment variable's name.
        name: String,
    },
    /// The literal matcher over the secret values could not be built.
    #[error("failed to build the matcher for {count} secret values")]
    Literals {
        /// How many secret values were given.
        count: usize,
        /// What the matcher builder said.
        #[source]
        source: aho_corasick::BuildError,
    },
}

impl RedactError {
    /// A suggestion for the user, rendered by the CLI as a `hint:` line.
    pub fn hint(&self) -> Option<String> {
        match self {
            RedactError::InvalidPattern { name, .. } => Some(format!(
                "fix the regex of `{name}` in `redact.patterns` (syntax of the Rust `regex` crate)"
            )),
            RedactError::EmptyMatch { .. } => {
                Some("make the pattern require at least one byte (use `+` instead of `*`)".into())
            }
            RedactError::ZeroMaxLen { .. } => {
                Some("give the pattern a maximum match length of at least 1 byte".into())
            }
            RedactError::MissingSecret { name } => Some(format!(
                "export `{name}` before running, or drop `--secret {name}`"
            )),
            RedactError::Literals { .. } => None,
        }
    }
}

/// Something worth telling the user about the redaction set-up, which did not
/// stop the [`Redactor`](crate::Redactor) from being built.
///
/// Warnings are data: the library never prints them. Get them with
/// [`Redactor::warnings`](crate::Redactor::warnings).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedactWarning {
    /// A secret value is shorter than [`MIN_SECRET_LEN`](crate::MIN_SECRET_LEN)
    /// bytes and is **not** redacted: redacting it would mangle ordinary
    /// output (think of a password `abc`).
    ShortSecret {
        /// The secret's name.
        name: String,
        /// The value's length in bytes.
        len: usize,
    },
    /// A secret value is on the allowlist and is therefore not redacted.
    AllowlistedSecret {
        /// The secret's name.
        name: String,
    },
}

impl std::fmt::Display for RedactWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RedactWarning::ShortSecret { name, len } => write!(
                f,
                "secret `{name}` is only {len} bytes long and will not be redacted (minimum {})",
                crate::MIN_SECRET_LEN
            ),
            RedactWarning::AllowlistedSecret { name } => {
                write!(f, "secret `{name}` is allowlisted and will not be redacted")
            }
        }
    }
}
