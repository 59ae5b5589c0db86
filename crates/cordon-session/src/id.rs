//! [`SessionId`]: short random names for sessions.

use cordon_workspace::state::ShortId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{SessionError, SessionErrorKind};

/// A session id: 8 lowercase base32 characters, e.g. `q7m2xk4a` (a [`ShortId`], as workspace
/// ids are).
///
/// Only such ids are accepted, so an id is always a safe file name and a safe ref component.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct SessionId(ShortId);

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
        ShortId::random()
            .map(SessionId)
            .map_err(|e| SessionError::io("getrandom", e))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The host ref that receives the session's commits on pull: `refs/cordon/sessions/<id>`.
    pub fn host_ref(&self) -> String {
        format!("refs/cordon/sessions/{}", self.0)
    }
}

impl AsRef<ShortId> for SessionId {
    fn as_ref(&self) -> &ShortId {
        &self.0
    }
}

impl std::str::FromStr for SessionId {
    type Err = SessionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ShortId::parse(text)
            .map(SessionId)
            .ok_or_else(|| SessionError::new(SessionErrorKind::InvalidId(text.to_owned())))
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
        f.write_str(self.0.as_str())
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
