//! [`WorkspaceId`]: short random names for workspaces.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{WorkspaceError, WorkspaceErrorKind};

/// The lowercase base32 alphabet (RFC 4648 without padding).
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The number of characters of an id: 40 random bits.
pub const ID_LEN: usize = 8;

/// A workspace id: 8 lowercase base32 characters, e.g. `k3v7qa2m`.
///
/// Only such ids are accepted, so an id is always a safe file name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct WorkspaceId(String);

impl JsonSchema for WorkspaceId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WorkspaceId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "pattern": "^[a-z2-7]{8}$" })
    }
}

/// A new short random id (as workspaces and sessions use): [`ID_LEN`] lowercase base32
/// characters, 40 bits from the kernel's random source.
pub fn random_short_id() -> std::io::Result<String> {
    let mut bytes = [0u8; 5];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let bits = bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    Ok((0..ID_LEN)
        .map(|i| ALPHABET[((bits >> (35 - 5 * i)) & 31) as usize] as char)
        .collect())
}

/// Whether `text` is a short id: [`ID_LEN`] lowercase base32 characters (always a safe file
/// name and ref component).
pub fn is_short_id(text: &str) -> bool {
    text.len() == ID_LEN && text.bytes().all(|b| ALPHABET.contains(&b))
}

impl WorkspaceId {
    /// A new random id from the kernel's random source.
    pub fn random() -> Result<WorkspaceId, WorkspaceError> {
        random_short_id()
            .map(WorkspaceId)
            .map_err(|e| WorkspaceError::io("getrandom", e))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for WorkspaceId {
    type Err = WorkspaceError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if is_short_id(text) {
            Ok(WorkspaceId(text.to_owned()))
        } else {
            Err(WorkspaceError::new(WorkspaceErrorKind::InvalidId(
                text.to_owned(),
            )))
        }
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
        f.write_str(&self.0)
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
