//! `cordon.error/v1`: how every door of cordon reports a failure as a document — the CLI on
//! stdout with `--json`, the MCP server in a tool error — and the classes of failure the
//! libraries give their errors ([`ErrorClass`]), so that each door reports a failure the same
//! way.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

crate::schema_tag!(
    /// The `schema` tag of the error document: `"cordon.error/v1"`.
    ErrorDocumentTag,
    "cordon.error/v1"
);

/// What every command given `--json` (or `--json-events`) prints on stdout, as one line, when
/// it fails: `cordon.error/v1`, the same for every command and every failure — usage errors
/// clap refused included. The human rendering (`error:`, `Caused by:`, `hint:`) goes to stderr
/// as without `--json`, and the exit code is the same. `cordon mcp` carries the same document
/// in a tool error's structured content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorDocument {
    /// Always `cordon.error/v1`.
    pub schema: ErrorDocumentTag,
    /// cordon's exit code: 1 the operation failed, 2 usage, 124 a wait ran out, 125 cordon
    /// itself failed.
    pub code: u8,
    /// What kind of error it is (stable, for scripts).
    pub kind: ErrorKind,
    /// What went wrong (the `error:` line).
    pub message: String,
    /// Why, outermost first (the `Caused by:` lines), each said once.
    pub causes: Vec<String>,
    /// How to fix it, when cordon knows (the `hint:` lines).
    pub hints: Vec<String>,
    /// The configuration file at fault (`cordon.toml`, `cordon-server.toml`), for kind
    /// `config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The 1-based line of `file` at fault, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The HTTP status the job service answered (`cordon jobs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// The job service's own error document (`cordon.api-error/v1`), as it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_error: Option<crate::ApiError>,
}

impl ErrorDocument {
    /// The document of `error` in `class`: its message, its causes each said once (see
    /// [`error_causes`]) and `hints`.
    pub fn of(
        class: ErrorClass,
        error: &(dyn std::error::Error + 'static),
        hints: Vec<String>,
    ) -> Self {
        ErrorDocument {
            schema: ErrorDocumentTag,
            code: class.code,
            kind: class.kind,
            message: error.to_string(),
            causes: error_causes(error),
            hints,
            file: None,
            line: None,
            http_status: None,
            api_error: None,
        }
    }
}

/// What kind of error a `cordon.error/v1` document reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The command line is wrong: an unknown flag, a bad value, a missing argument, options
    /// that cannot be combined (exit 2).
    Usage,
    /// A configuration file is invalid or unreadable; `file` and `line` say where (exit 2).
    Config,
    /// An id names nothing: a workspace, session, run, token or job (exit 2).
    NotFound,
    /// cordon or the job service refused on purpose: a patch that leaves the workspace, a
    /// hostile bundle, a credential directory to bind, a policy rule, a spent budget (exit 2
    /// when the input is at fault, else 1).
    Refused,
    /// Someone else holds what was asked for, or it moved on: another writer in the session,
    /// another watcher, diverged branches, a dirty checkout (exit 1; `session exec`: 125).
    Conflict,
    /// A bounded wait ran out (exit 124).
    Timeout,
    /// This host cannot do what was asked: a protection it cannot enforce, overlays it cannot
    /// mount (exit 125).
    Unsupported,
    /// The job service cannot be reached, or is too busy to answer (exit 125 / 1).
    Unavailable,
    /// cordon itself failed: the file system, the run history, git, supervision (exit 125).
    Internal,
}

/// cordon's documented exit codes for failures (the `code` of a `cordon.error/v1` document).
pub mod exit_code {
    /// The operation failed (a gate blocked, a refusal, a conflict).
    pub const FAILED: u8 = 1;
    /// A usage error: a bad value, an unknown id, a bad configuration.
    pub const USAGE: u8 = 2;
    /// A bounded wait ran out.
    pub const TIMED_OUT: u8 = 124;
    /// cordon itself failed.
    pub const CORDON_FAILED: u8 = 125;
}

/// How a library's failure is reported by every door: the exit code the CLI exits with and
/// the kind its `cordon.error/v1` document names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorClass {
    /// The exit code ([`exit_code`]).
    pub code: u8,
    /// The kind.
    pub kind: ErrorKind,
}

impl ErrorClass {
    /// A usage error (exit 2).
    pub const USAGE: ErrorClass = ErrorClass::new(exit_code::USAGE, ErrorKind::Usage);
    /// cordon's own failure (exit 125).
    pub const INTERNAL: ErrorClass = ErrorClass::new(exit_code::CORDON_FAILED, ErrorKind::Internal);

    /// The class of exit code `code` and kind `kind`.
    pub const fn new(code: u8, kind: ErrorKind) -> Self {
        ErrorClass { code, kind }
    }
}

/// The causes of `error` below its message, outermost first, each said once: a cause whose
/// text the lines above already contain adds nothing (messages often quote their source).
pub fn error_causes(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut said = error.to_string();
    let mut causes = Vec::new();
    let mut next = error.source();
    while let Some(cause) = next {
        next = cause.source();
        let text = cause.to_string();
        if text.is_empty() || said.contains(&text) {
            continue;
        }
        said.push('\n');
        said.push_str(&text);
        causes.push(text);
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn a_cause_is_said_once() {
        let inner = Layer("a/../x leaves the workspace", None);
        let quoting = Layer(
            "patch refused: a/../x leaves the workspace",
            Some(inner.into()),
        );
        let outer = Layer("cannot apply the patch", Some(quoting.into()));
        let document = ErrorDocument::of(ErrorClass::USAGE, &outer, vec!["fix it".into()]);
        assert_eq!(document.message, "cannot apply the patch");
        assert_eq!(
            document.causes,
            ["patch refused: a/../x leaves the workspace"]
        );
        assert_eq!((document.code, document.kind), (2, ErrorKind::Usage));
        assert_eq!(document.hints, ["fix it"]);
    }
}
