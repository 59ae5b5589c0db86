//! Collecting secrets and patterns, and compiling them into a [`Redactor`].

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::sync::Arc;

use crate::anchors::Anchors;
use crate::builtin::{BUILTINS, MaxLen};
use crate::error::{RedactError, RedactWarning};
use crate::literal::{Literals, PartialTail};
use crate::pattern::CompiledPattern;
use crate::redactor::{Inner, Redactor};

/// Secret values shorter than this many bytes are not redacted (and produce
/// a [`RedactWarning::ShortSecret`]).
pub const MIN_SECRET_LEN: usize = 8;

/// Default maximum match length of user patterns, in bytes.
pub const DEFAULT_PATTERN_MAX_LEN: usize = 1024;

/// Default maximum match length of PEM private-key blocks, in bytes.
pub const DEFAULT_PRIVATE_KEY_MAX_LEN: usize = 4 * 1024;

/// Words that make an environment variable's name look secret (compared
/// ignoring ASCII case).
const SECRET_NAME_WORDS: &[&str] = &["TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL"];

// `is_secret_env_name` compares byte windows without regard to ASCII case: that is `contains`
// on the uppercased name only for words that are non-empty and ASCII capitals.
const _: () = {
    let mut i = 0;
    while i < SECRET_NAME_WORDS.len() {
        let word = SECRET_NAME_WORDS[i].as_bytes();
        assert!(!word.is_empty(), "a secret-name word is empty");
        let mut j = 0;
        while j < word.len() {
            assert!(
                word[j].is_ascii_uppercase(),
                "secret-name words are ASCII capitals"
            );
            j += 1;
        }
        i += 1;
    }
};

/// Whether an environment variable's name looks like it holds a secret: it
/// contains `TOKEN`, `SECRET`, `PASSWORD`, `KEY` or `CREDENTIAL`, in any
/// case.
///
/// ```
/// use cordon_redact::is_secret_env_name;
///
/// assert!(is_secret_env_name("GITHUB_TOKEN"));
/// assert!(is_secret_env_name("aws_secret_access_key"));
/// assert!(!is_secret_env_name("HOME"));
/// ```
pub fn is_secret_env_name(name: &str) -> bool {
    // Byte windows compared without regard to ASCII case: no uppercase copy of every name of
    // the environment at every run (the words are ASCII, so this is `contains` on the
    // uppercased name).
    // Words are compared only where one's first letter stands (a table lookup per byte
    // skips the rest): this runs for every variable of the environment at every run.
    let name = name.as_bytes();
    (0..name.len()).any(|at| {
        STARTS_A_WORD[usize::from(name[at])] && {
            let rest = &name[at..];
            SECRET_NAME_WORDS.iter().any(|word| {
                let word = word.as_bytes();
                rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word)
            })
        }
    })
}

/// The bytes a word of [`SECRET_NAME_WORDS`] begins with, in either case.
const STARTS_A_WORD: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < SECRET_NAME_WORDS.len() {
        let first = SECRET_NAME_WORDS[i].as_bytes()[0];
        table[first as usize] = true;
        table[first.to_ascii_lowercase() as usize] = true;
        i += 1;
    }
    table
};

/// Collects secrets and patterns, then [`build`](Self::build)s a
/// [`Redactor`].
///
/// Built-in patterns are on by default.
#[derive(Clone, Debug)]
pub struct RedactorBuilder {
    secrets: Vec<(String, Vec<u8>)>,
    missing: Vec<String>,
    patterns: Vec<UserPattern>,
    allow: Vec<Vec<u8>>,
    builtins: bool,
    pattern_max_len: usize,
    private_key_max_len: usize,
}

#[derive(Clone, Debug)]
struct UserPattern {
    name: String,
    regex: String,
    max_len: Option<usize>,
}

impl Default for RedactorBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl RedactorBuilder {
    /// A builder with the built-in patterns on and nothing else.
    pub fn new() -> Self {
        RedactorBuilder {
            secrets: Vec::new(),
            missing: Vec::new(),
            patterns: Vec::new(),
            allow: Vec::new(),
            builtins: true,
            pattern_max_len: DEFAULT_PATTERN_MAX_LEN,
            private_key_max_len: DEFAULT_PRIVATE_KEY_MAX_LEN,
        }
    }

    /// Redacts `value` as `[REDACTED:<name>]`. Values shorter than
    /// [`MIN_SECRET_LEN`] are skipped with a warning.
    pub fn add_secret(&mut self, name: impl Into<String>, value: impl AsRef<[u8]>) -> &mut Self {
        self.secrets.push((name.into(), value.as_ref().to_vec()));
        self
    }

    /// Redacts the value of the environment variable `name` (what
    /// `--secret NAME` asks for), taken from `env`. If `env` has no such
    /// variable, [`build`](Self::build) fails with
    /// [`RedactError::MissingSecret`].
    pub fn add_secret_from_env<K, V>(
        &mut self,
        name: &str,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> &mut Self
    where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        match env
            .into_iter()
            .find(|(k, _)| k.as_ref() == OsStr::new(name))
        {
            Some((_, value)) => self.add_secret(name, os_bytes(value.as_ref())),
            None => {
                self.missing.push(name.to_owned());
                self
            }
        }
    }

    /// Redacts the values of the variables in `env` whose names look secret
    /// (see [`is_secret_env_name`]); give it the environment passed to the
    /// program.
    pub fn add_env<K, V>(&mut self, env: impl IntoIterator<Item = (K, V)>) -> &mut Self
    where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (key, value) in env {
            let name = key.as_ref().to_string_lossy();
            if is_secret_env_name(&name) {
                self.add_secret(name.into_owned(), os_bytes(value.as_ref()));
            }
        }
        self
    }

    /// Redacts matches of the user regex `regex` (syntax of the `regex`
    /// crate, matched on bytes) as `[REDACTED:<name>]`. If the regex has a
    /// capture group named `secret`, only that group is redacted. Matches
    /// are at most [`pattern_max_len`](Self::pattern_max_len) bytes long.
    pub fn add_pattern(&mut self, name: impl Into<String>, regex: impl Into<String>) -> &mut Self {
        self.patterns.push(UserPattern {
            name: name.into(),
            regex: regex.into(),
            max_len: None,
        });
        self
    }

    /// Like [`add_pattern`](Self::add_pattern), with this pattern's own
    /// maximum match length.
    pub fn add_pattern_with_max_len(
        &mut self,
        name: impl Into<String>,
        regex: impl Into<String>,
        max_len: usize,
    ) -> &mut Self {
        self.patterns.push(UserPattern {
            name: name.into(),
            regex: regex.into(),
            max_len: Some(max_len),
        });
        self
    }

    /// Never redacts exactly `literal` (say, a public example token): a
    /// secret value equal to it is skipped, and so is a pattern match whose
    /// redacted part, or whole match, equals it.
    pub fn allow(&mut self, literal: impl AsRef<[u8]>) -> &mut Self {
        self.allow.push(literal.as_ref().to_vec());
        self
    }

    /// Turns the built-in patterns on (the default) or off.
    pub fn builtin_patterns(&mut self, yes: bool) -> &mut Self {
        self.builtins = yes;
        self
    }

    /// Sets the default maximum match length of user patterns (default
    /// [`DEFAULT_PATTERN_MAX_LEN`]). A match is looked for only in this many
    /// bytes from where it starts; one that would be longer ends there.
    pub fn pattern_max_len(&mut self, len: usize) -> &mut Self {
        self.pattern_max_len = len;
        self
    }

    /// Sets the maximum length of a PEM private-key block (default
    /// [`DEFAULT_PRIVATE_KEY_MAX_LEN`]). A longer block, or one whose END
    /// line never comes, is redacted from its BEGIN line for this many bytes.
    pub fn private_key_max_len(&mut self, len: usize) -> &mut Self {
        self.private_key_max_len = len;
        self
    }

    /// Compiles everything into a [`Redactor`].
    pub fn build(&self) -> Result<Redactor, RedactError> {
        if let Some(name) = self.missing.first() {
            return Err(RedactError::MissingSecret { name: name.clone() });
        }
        let allow: HashSet<Vec<u8>> = self.allow.iter().cloned().collect();
        let mut names = Names::default();
        let mut warnings = Vec::new();

        let mut values: Vec<(Vec<u8>, usize)> = Vec::new();
        let mut seen = HashSet::new();
        for (name, value) in &self.secrets {
            if value.len() < MIN_SECRET_LEN {
                warnings.push(RedactWarning::ShortSecret {
                    name: name.clone(),
                    len: value.len(),
                });
            } else if allow.contains(value) {
                warnings.push(RedactWarning::AllowlistedSecret { name: name.clone() });
            } else if seen.insert(value.as_slice()) {
                values.push((value.clone(), names.id(name)));
            }
        }
        let literals = if values.is_empty() {
            None
        } else {
            Some(Literals::new(values)?)
        };

        let mut patterns = Vec::new();
        if self.builtins {
            for b in BUILTINS {
                let max_len = match b.max_len {
                    MaxLen::Fixed(len) => len,
                    MaxLen::PrivateKey => self.private_key_max_len,
                };
                let anchors = b.anchors.iter().map(|a| a.as_bytes().to_vec()).collect();
                let id = names.id(b.name);
                patterns.push(CompiledPattern::compile(
                    b.name,
                    id,
                    b.regex,
                    max_len,
                    Some(anchors),
                    true,
                )?);
            }
        }
        for p in &self.patterns {
            let max_len = p.max_len.unwrap_or(self.pattern_max_len);
            let id = names.id(&p.name);
            patterns.push(CompiledPattern::compile(
                &p.name, id, &p.regex, max_len, None, false,
            )?);
        }
        let unanchored = (0..patterns.len())
            .filter(|&i| patterns[i].anchors.is_none())
            .collect();
        // Every anchor, with the pattern it belongs to.
        let anchors: Vec<(&[u8], usize)> = patterns
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.anchors.iter().flatten().map(move |a| (a.as_slice(), i)))
            .collect();
        // The automaton is built when a stream has text enough for it (see `anchors`).
        let anchor_finder = (!anchors.is_empty())
            .then(|| Anchors::new(anchors.iter().map(|&(a, _)| a.to_vec()).collect()));
        let anchor_patterns = anchors
            .iter()
            .map(|&(found, _)| patterns_at_anchor(found, &anchors))
            .collect();
        let anchor_tail = PartialTail::new(anchors.iter().map(|&(a, _)| a.to_vec()).collect());

        Ok(Redactor {
            inner: Arc::new(Inner {
                literals,
                patterns,
                anchor_patterns,
                unanchored,
                anchors: anchor_finder,
                anchor_tail,
                allow,
                replacements: names.replacements,
                warnings,
            }),
        })
    }
}

/// The patterns to try where the anchor finder reports `found`, each with
/// the longer anchors one of which must occur there too (none: it surely
/// does).
///
/// The finder reports one anchor per position, but every anchor that occurs
/// there is either a prefix of `found` (so it occurs too) or extends it (so
/// it is checked before its pattern is tried).
fn patterns_at_anchor(found: &[u8], anchors: &[(&[u8], usize)]) -> Vec<(usize, Vec<Vec<u8>>)> {
    let mut out: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
    for &(_, p) in anchors.iter().filter(|(a, _)| found.starts_with(a)) {
        if !out.iter().any(|(q, _)| *q == p) {
            out.push((p, Vec::new()));
        }
    }
    for &(a, p) in anchors {
        if a.len() > found.len() && a.starts_with(found) {
            match out.iter_mut().find(|(q, _)| *q == p) {
                Some((_, longer)) if longer.is_empty() => {}
                Some((_, longer)) => longer.push(a.to_vec()),
                None => out.push((p, vec![a.to_vec()])),
            }
        }
    }
    out
}

/// Replacement texts, one per distinct name.
#[derive(Default)]
struct Names {
    ids: HashMap<String, usize>,
    replacements: Vec<Vec<u8>>,
}

impl Names {
    fn id(&mut self, name: &str) -> usize {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.replacements.len();
        self.replacements
            .push(format!("[REDACTED:{name}]").into_bytes());
        self.ids.insert(name.to_owned(), id);
        id
    }
}

/// The bytes of an OS string (exact on Unix, lossy elsewhere).
fn os_bytes(s: &OsStr) -> Vec<u8> {
    #[cfg(unix)]
    {
        std::os::unix::ffi::OsStrExt::as_bytes(s).to_vec()
    }
    #[cfg(not(unix))]
    {
        s.to_string_lossy().into_owned().into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-window check says what `contains` on the uppercased name says, for names in
    /// any case, with non-ASCII letters (whose uppercase is not ASCII), words at either end,
    /// overlapping and cut short.
    #[test]
    fn secret_names_are_found_as_the_uppercased_name_would_find_them() {
        let reference = |name: &str| {
            let upper = name.to_ascii_uppercase();
            SECRET_NAME_WORDS.iter().any(|word| upper.contains(word))
        };
        let names = [
            "",
            "K",
            "KE",
            "KEY",
            "key",
            "kEy",
            "MONKEY",
            "KEYS",
            "TOKE",
            "TOKEN",
            "_token_",
            "GITHUB_TOKEN",
            "aws_secret_access_key",
            "PASSWOR",
            "password",
            "PassWord1",
            "CREDENTIALS",
            "credential",
            "SECRE",
            "SECRET",
            "HOME",
            "PATH",
            "ĸEY",
            "ṬOKEN",
            "tokén",
            "TOKEŃ",
            "secret\u{0}",
            "ßKEY",
            "ПАРОЛЬ",
            "PASS_WORD",
            "K_E_Y",
            "XKE",
            "AKEY",
            "XXSECRE",
            "TOKENTOKEN",
            "cREDENTIALs",
            "PPASSWORD",
        ];
        for name in names {
            assert_eq!(is_secret_env_name(name), reference(name), "{name:?}");
        }
        assert!(is_secret_env_name("kEy") && !is_secret_env_name("ĸEY"));
    }
}
