//! [`SessionId`]: short random names for sessions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{SessionError, SessionErrorKind};

/// The lowercase base32 alphabet (RFC 4648 without padding).
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The number of characters of an id: 40 random bits.
const ID_LEN: usize = 8;

/// A session id: 8 lowercase base32 characters, e.g. `q7m2xk4a`.
///
/// Only such ids are accepted, so an id is always a safe file name and a safe ref component.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl JsonSchema for SessionId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SessionId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "pattern": "^[a-z2-7]{8}$" })
    }
}

impl SessionId {
    /// A new random id from the kernel's random source.
    pub fn random() -> Result<SessionId, SessionError> {
        let mut bytes = [0u8; 5];
        getrandom::fill(&mut bytes)
            .map_err(|e| SessionError::io("getrandom", std::io::Error::other(e.to_string())))?;
        let bits = bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        let id = (0..ID_LEN)
            .map(|i| ALPHABET[((bits >> (35 - 5 * i)) & 31) as usize] as char)
            .collect();
        Ok(SessionId(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The host ref that receives the session's commits on pull: `refs/cordon/sessions/<id>`.
    pub fn host_ref(&self) -> String {
        format!("refs/cordon/sessions/{}", self.0)
    }
}

impl std::str::FromStr for SessionId {
    type Err = SessionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.len() == ID_LEN && text.bytes().all(|b| ALPHABET.contains(&b)) {
            Ok(SessionId(text.to_owned()))
        } else {
            Err(SessionError::new(SessionErrorKind::InvalidId(
                text.to_owned(),
            )))
        }
    }
}

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse()
            .map_err(|_| serde::de::Error::custom(format!("{text:?} is not a session id")))
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_parse_and_differ() {
        let a = SessionId::random().unwrap();
        let b = SessionId::random().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().parse::<SessionId>().unwrap(), a);
        assert_eq!(a.host_ref(), format!("refs/cordon/sessions/{a}"));
    }

    #[test]
    fn only_base32_ids_of_eight_characters() {
        for bad in [
            "",
            "abc",
            "abcdefgh1",
            "ABCDEFGH",
            "../../x1",
            "abcdef/h",
            "abcd 234",
        ] {
            assert!(bad.parse::<SessionId>().is_err(), "{bad}");
        }
        assert!("abcd2345".parse::<SessionId>().is_ok());
    }
}
