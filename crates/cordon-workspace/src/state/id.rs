//! [`ShortId`]: short random names (of workspaces, sessions, base holders, cache layers).

use serde::Serialize;

/// The lowercase base32 alphabet (RFC 4648 without padding).
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The number of characters of an id: 40 random bits.
pub const ID_LEN: usize = 8;

/// A short id: [`ID_LEN`] lowercase base32 characters, e.g. `k3v7qa2m`.
///
/// Only such ids are made or parsed, so an id is always a safe file name and ref component.
/// Serialized as the bare string; `Debug` shows the string too.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ShortId(String);

impl ShortId {
    /// A new random id: 40 bits from the kernel's random source.
    pub fn random() -> std::io::Result<ShortId> {
        random_short_id().map(ShortId)
    }

    /// `text` as an id, `None` unless it is one.
    pub fn parse(text: &str) -> Option<ShortId> {
        is_short_id(text).then(|| ShortId(text.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ShortId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

impl std::fmt::Display for ShortId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A new short random id as text: [`ID_LEN`] lowercase base32 characters, 40 bits from the
/// kernel's random source.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_are_short_ids_and_differ() {
        let a = ShortId::random().unwrap();
        let b = ShortId::random().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), ID_LEN);
        assert_eq!(ShortId::parse(a.as_str()), Some(a.clone()));
        assert_eq!(a.to_string(), a.as_str());
    }

    #[test]
    fn only_base32_ids_of_eight_characters_parse() {
        for bad in [
            "",
            "abc",
            "abcdefgh1",
            "ABCDEFGH",
            "../../x1",
            "abcdefg1",
            "abcdef/h",
            "abcd 234",
            "abcdefg\u{e9}",
        ] {
            assert_eq!(ShortId::parse(bad), None, "{bad:?}");
            assert!(!is_short_id(bad), "{bad:?}");
        }
        assert_eq!(ShortId::parse("abcd2345").unwrap().as_str(), "abcd2345");
    }

    #[test]
    fn debug_and_json_show_the_bare_string() {
        let id = ShortId::parse("abcd2345").unwrap();
        assert_eq!(format!("{id:?}"), "\"abcd2345\"");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"abcd2345\"");
    }
}
