//! The job service's error answer, `cordon.api-error/v1`: what `cordon serve` answers when it
//! refuses a request, and what `cordon jobs` carries into its own error document.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

crate::schema_tag!(
    /// The tag of an error answer: `cordon.api-error/v1`.
    ApiErrorTag,
    "cordon.api-error/v1"
);

/// An error answer: `cordon.api-error/v1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiError {
    /// `cordon.api-error/v1`.
    pub schema: ApiErrorTag,
    /// A stable code: `unauthorized`, `forbidden`, `not_found`, `bad_request`,
    /// `policy`, `conflict`, `budget`, `busy`, `too_large`, `internal`.
    pub error: String,
    /// What is wrong, for people.
    pub message: String,
    /// The policy rule that refused the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// When the budget resets (RFC 3339), for `budget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<String>,
    /// The job the answer names: for `conflict`, the one the idempotency key already names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}
