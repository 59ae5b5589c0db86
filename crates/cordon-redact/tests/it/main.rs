//! cordon-redact's integration tests, one binary (`cargo nextest run -p cordon-redact`): the
//! redactor as its users see it, every pattern kind, chunk boundaries, and properties over
//! random secrets, texts and chunkings.

mod patterns;
mod properties;
mod secrets;
mod streaming;

use cordon_redact::{Redactor, RedactorBuilder};
use pretty_assertions::assert_eq;

/// A GitHub token that is not a real one.
pub(crate) const GHP: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
pub(crate) const JWT: &str =
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk";

pub(crate) fn builtins() -> Redactor {
    RedactorBuilder::new().build().unwrap()
}

/// Redacts `input` pushed in chunks of `size` bytes.
pub(crate) fn chunked(redactor: &Redactor, input: &[u8], size: usize) -> Vec<u8> {
    let mut stream = redactor.stream();
    let mut out = Vec::new();
    for chunk in input.chunks(size) {
        stream.push(chunk, &mut out);
    }
    stream.finish(&mut out);
    out
}

/// Redacts `input` whole, in 1-byte chunks and split at every byte, checks
/// they all agree, and returns the result as a string.
pub(crate) fn redact(redactor: &Redactor, input: &str) -> String {
    let whole = redactor.redact_all(input.as_bytes());
    assert_eq!(
        chunked(redactor, input.as_bytes(), 1),
        whole,
        "1-byte chunks"
    );
    for split in 0..=input.len() {
        let mut stream = redactor.stream();
        let mut out = Vec::new();
        stream.push(&input.as_bytes()[..split], &mut out);
        stream.push(&input.as_bytes()[split..], &mut out);
        stream.finish(&mut out);
        assert_eq!(out, whole, "split at {split}");
    }
    String::from_utf8(whole).unwrap()
}
