//! Properties over random secrets, texts and chunkings.

use cordon_redact::{Redactor, RedactorBuilder};
use proptest::prelude::*;

use crate::{builtins, chunked};

/// Random secrets: 8..64 printable ASCII bytes.
fn secret() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(0x21u8..0x7f, 8..64)
}

/// Random text: mostly printable, some newlines and binary bytes, and
/// pieces that look like the starts of built-in patterns.
fn text() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        8 => proptest::collection::vec(0x20u8..0x7f, 0..40),
        1 => proptest::collection::vec(any::<u8>(), 0..8),
        1 => Just(b"\n".to_vec()),
        1 => prop_oneof![
            Just(b"ghp_".to_vec()), Just(b"AKIA".to_vec()), Just(b"xoxb-".to_vec()),
            Just(b"eyJ".to_vec()), Just(b"-----BEGIN".to_vec()), Just(b"Authorization: ".to_vec()),
            Just(b"https://".to_vec()), Just(b"://u:".to_vec()), Just(b"@".to_vec()),
            Just(b"123x45".to_vec()), Just(b"12y".to_vec()), Just(b"tok_".to_vec()), Just(b"-----END PRIVATE KEY-----".to_vec()),
        ],
    ];
    proptest::collection::vec(piece, 0..20).prop_map(|pieces| pieces.concat())
}

/// Sorted split points into a text of length `len`.
fn splits(len: usize, cuts: &[usize]) -> Vec<usize> {
    let mut s: Vec<usize> = cuts.iter().map(|c| c % (len + 1)).collect();
    s.sort_unstable();
    s
}

fn push_split(redactor: &Redactor, input: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut stream = redactor.stream();
    let mut out = Vec::new();
    let mut last = 0;
    for &cut in &splits(input.len(), cuts) {
        stream.push(&input[last..cut], &mut out);
        last = cut;
    }
    stream.push(&input[last..], &mut out);
    stream.finish(&mut out);
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn secrets_never_appear(
        secrets in proptest::collection::vec(secret(), 1..4),
        parts in proptest::collection::vec(text(), 1..5),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        one_byte in any::<bool>(),
    ) {
        let mut builder = RedactorBuilder::new();
        for (i, s) in secrets.iter().enumerate() {
            builder.add_secret(format!("S{i}"), s);
        }
        let r = builder.build().unwrap();
        // Text with the secrets between the parts.
        let mut input = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            input.extend_from_slice(&secrets[i % secrets.len()]);
            input.extend_from_slice(part);
        }
        let out = if one_byte { chunked(&r, &input, 1) } else { push_split(&r, &input, &cuts) };
        for s in &secrets {
            prop_assert!(!contains(&out, s), "secret {:?} in {:?}", String::from_utf8_lossy(s), String::from_utf8_lossy(&out));
        }
    }

    #[test]
    fn text_without_secrets_is_unchanged(
        secrets in proptest::collection::vec(secret(), 0..4),
        input in proptest::collection::vec(0x20u8..0x7f, 0..400),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut builder = RedactorBuilder::new();
        builder.builtin_patterns(false);
        for (i, s) in secrets.iter().enumerate() {
            builder.add_secret(format!("S{i}"), s);
        }
        let r = builder.build().unwrap();
        prop_assume!(secrets.iter().all(|s| !contains(&input, s)));
        prop_assert_eq!(push_split(&r, &input, &cuts), input.clone());
        prop_assert_eq!(chunked(&r, &input, 1), input);
    }

    #[test]
    fn builtins_leave_plain_text_alone(
        input in proptest::collection::vec(prop_oneof![0x20u8..0x7f, Just(b'\n')], 0..400),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        // Text of words no pattern can match: no `:`, `=`, `_`, `-`.
        let input: Vec<u8> = input.into_iter().filter(|b| !b":=_-".contains(b)).collect();
        let r = builtins();
        prop_assert_eq!(push_split(&r, &input, &cuts), input);
    }

    #[test]
    fn output_does_not_depend_on_chunking(
        secrets in proptest::collection::vec(secret(), 0..3),
        parts in proptest::collection::vec(text(), 1..5),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let mut builder = RedactorBuilder::new();
        builder
            .private_key_max_len(48)
            .add_pattern("unanchored", r"[0-9]{3}x[0-9]+")
            .add_pattern_with_max_len("anchored", r"tok_[a-z0-9]+", 12)
            .add_pattern_with_max_len("assertions", r"\b[0-9]{2}y\b", 6);
        for (i, s) in secrets.iter().enumerate() {
            builder.add_secret(format!("S{i}"), s);
        }
        let r = builder.build().unwrap();
        let mut input = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            if let Some(s) = secrets.get(i % secrets.len().max(1)) {
                input.extend_from_slice(s);
            }
            input.extend_from_slice(part);
        }
        let whole = r.redact_all(&input);
        prop_assert_eq!(push_split(&r, &input, &cuts), whole.clone());
        prop_assert_eq!(chunked(&r, &input, 1), whole);
    }
}
