//! [`WorkspaceId`]: short random names for workspaces.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{WorkspaceError, WorkspaceErrorKind};
use crate::state::ShortId;

/// A workspace id: 8 lowercase base32 characters, e.g. `k3v7qa2m` (a [`ShortId`]).
///
/// Only such ids are accepted, so an id is always a safe file name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct WorkspaceId(ShortId);

impl JsonSchema for WorkspaceId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WorkspaceId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "pattern": "^[a-z2-7]{8}$" })
    }
}

impl WorkspaceId {
    /// A new random id from the kernel's random source.
    pub fn random() -> Result<WorkspaceId, WorkspaceError> {
        ShortId::random()
            .map(WorkspaceId)
            .map_err(|e| WorkspaceError::io("getrandom", e))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl AsRef<ShortId> for WorkspaceId {
    fn as_ref(&self) -> &ShortId {
        &self.0
    }
}

impl std::str::FromStr for WorkspaceId {
    type Err = WorkspaceError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ShortId::parse(text)
            .map(WorkspaceId)
            .ok_or_else(|| WorkspaceError::new(WorkspaceErrorKind::InvalidId(text.to_owned())))
    }
}

impl<'de> Deserialize<'de> for WorkspaceId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse()
            .map_err(|_| serde::de::Error::custom(format!("{text:?} is not a workspace id")))
    }
}

impl std::fmt::Display for WorkspaceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_parse_and_differ() {
        let a = WorkspaceId::random().unwrap();
        let b = WorkspaceId::random().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().parse::<WorkspaceId>().unwrap(), a);
    }

    #[test]
    fn only_base32_ids_of_eight_characters() {
        for bad in [
            "",
            "abc",
            "abcdefgh1",
            "ABCDEFGH",
            "../../x1",
            "abcdefg1",
            "abcdef/h",
        ] {
            assert!(bad.parse::<WorkspaceId>().is_err(), "{bad}");
        }
        assert!("abcd2345".parse::<WorkspaceId>().is_ok());
    }
}
