//! How a tool call fails: an MCP tool error (`isError`) carrying cordon's `cordon.error/v1`
//! document as structured content, its `error:` / `Caused by:` / `hint:` lines as text. A
//! caller's mistake or a refusal is never a protocol error: those are for protocol misuse.

use cordon_types::{ErrorClass, ErrorDocument, ErrorKind, exit_code};
use rmcp::model::{CallToolResult, ContentBlock};

/// A failed tool call, as every door of cordon reports failures.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailure {
    /// The `cordon.error/v1` document (boxed: failures travel by value).
    pub document: Box<ErrorDocument>,
}

impl ToolFailure {
    /// A failure of `error`, in `class`, with its hint.
    pub fn of(
        class: ErrorClass,
        error: &(dyn std::error::Error + 'static),
        hint: Option<String>,
    ) -> Self {
        ToolFailure {
            document: Box::new(ErrorDocument::of(class, error, hint.into_iter().collect())),
        }
    }

    /// A failure made of a message.
    pub fn message(class: ErrorClass, message: impl Into<String>) -> Self {
        ToolFailure::of(class, &Message(message.into()), None)
    }

    /// The caller's input is wrong (usage, exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        ToolFailure::message(ErrorClass::USAGE, message)
    }

    /// A call asking for more than the operator's bound `flag` allows: refused (exit 2),
    /// naming the bound.
    pub fn beyond_bound(flag: &str, message: impl Into<String>) -> Self {
        ToolFailure::message(
            ErrorClass::new(exit_code::USAGE, ErrorKind::Refused),
            message,
        )
        .hint(format!(
            "the operator started this server with {flag}: ask within it (the agent cannot \
             change it)"
        ))
    }

    /// An id that names nothing this server may show (exit 2).
    pub fn not_found(message: impl Into<String>) -> Self {
        ToolFailure::message(
            ErrorClass::new(exit_code::USAGE, ErrorKind::NotFound),
            message,
        )
    }

    /// cordon itself failed (exit 125).
    pub fn internal(message: impl Into<String>) -> Self {
        ToolFailure::message(ErrorClass::INTERNAL, message)
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.document.hints.push(hint.into());
        self
    }

    /// Adds a cause in front of the others, and makes `context` the message.
    pub fn context(mut self, context: impl Into<String>) -> Self {
        let message = std::mem::replace(&mut self.document.message, context.into());
        self.document.causes.insert(0, message);
        self
    }

    /// The lines a person reads: `error:`, `Caused by:`, `hint:`.
    pub fn lines(&self) -> Vec<String> {
        let document = &self.document;
        let mut lines = vec![format!("error: {}", document.message)];
        if !document.causes.is_empty() {
            lines.push("Caused by:".to_owned());
            lines.extend(document.causes.iter().map(|c| format!("  {c}")));
        }
        lines.extend(document.hints.iter().map(|h| format!("hint: {h}")));
        lines
    }

    /// The MCP tool error.
    pub fn into_result(self) -> CallToolResult {
        let value = serde_json::to_value(&self.document).unwrap_or(serde_json::Value::Null);
        let mut result = CallToolResult::structured_error(value);
        result.content = vec![ContentBlock::text(self.lines().join("\n"))];
        result
    }
}

/// A message as an error (no cause).
#[derive(Debug)]
struct Message(String);

impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

impl From<cordon_runner::RunError> for ToolFailure {
    fn from(error: cordon_runner::RunError) -> Self {
        let hint = error.hint();
        ToolFailure::of(error.error_class(), &error, hint)
    }
}

impl From<cordon_workspace::WorkspaceError> for ToolFailure {
    fn from(error: cordon_workspace::WorkspaceError) -> Self {
        let hint = error.hint().map(str::to_owned);
        ToolFailure::of(error.error_class(), &error, hint)
    }
}

impl From<cordon_session::SessionError> for ToolFailure {
    fn from(error: cordon_session::SessionError) -> Self {
        let hint = error.hint();
        ToolFailure::of(error.error_class(), &error, hint)
    }
}

impl From<cordon_verify::VerifyError> for ToolFailure {
    fn from(error: cordon_verify::VerifyError) -> Self {
        let hint = error.hint();
        let config = match &error {
            cordon_verify::VerifyError::Config(config) => {
                Some((config.path.display().to_string(), config.line))
            }
            _ => None,
        };
        let mut failure = ToolFailure::of(error.error_class(), &error, hint);
        if let Some((file, line)) = config {
            failure.document.file = Some(file);
            failure.document.line = line.and_then(|l| u64::try_from(l).ok());
        }
        failure
    }
}

impl From<cordon_store::StoreError> for ToolFailure {
    fn from(error: cordon_store::StoreError) -> Self {
        let hint = error.hint();
        ToolFailure::of(ErrorClass::INTERNAL, &error, hint)
    }
}

impl From<cordon_runner::RecordError> for ToolFailure {
    fn from(error: cordon_runner::RecordError) -> Self {
        let hint = error.hint();
        ToolFailure::of(ErrorClass::INTERNAL, &error, Some(hint))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_refusal_is_a_tool_error_naming_the_bound() {
        let failure = ToolFailure::beyond_bound(
            "--max-timeout 1m",
            "timeout 10m is beyond the operator's bound --max-timeout 1m",
        );
        assert_eq!(failure.document.kind, ErrorKind::Refused);
        assert_eq!(failure.document.code, 2);
        let result = failure.into_result();
        assert_eq!(result.is_error, Some(true));
        let structured = result.structured_content.unwrap();
        assert_eq!(structured["schema"], "cordon.error/v1");
        assert!(
            structured["hints"][0]
                .as_str()
                .unwrap()
                .contains("--max-timeout 1m"),
            "{structured}"
        );
    }
}
