//! An [`io::Write`] adapter that redacts on the way through.

use std::io::{self, Write};

use crate::redactor::Redactor;
use crate::stream::StreamRedactor;

/// Redacts everything written to it before passing it on to `W`.
///
/// Call [`finish`](Self::finish) when done: it writes out the bytes held
/// back as a possible start of a secret. Dropping the writer without it loses
/// them (never leaks them). [`flush`](Write::flush) flushes `W` but keeps
/// the held-back bytes, since they may be half a secret.
///
/// ```
/// use std::io::Write;
/// use cordon_redact::{RedactingWriter, RedactorBuilder};
///
/// let redactor = RedactorBuilder::new().add_secret("PW", "correct-horse").build()?;
/// let mut writer = RedactingWriter::new(&redactor, Vec::new());
/// writer.write_all(b"pw=correct-")?;
/// writer.write_all(b"horse\n")?;
/// let out = writer.finish()?;
/// assert_eq!(out, b"pw=[REDACTED:PW]\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedactingWriter<W: Write> {
    inner: W,
    stream: StreamRedactor,
    out: Vec<u8>,
}

impl<W: Write> RedactingWriter<W> {
    /// Wraps `inner`, redacting with `redactor`.
    pub fn new(redactor: &Redactor, inner: W) -> Self {
        RedactingWriter {
            inner,
            stream: redactor.stream(),
            out: Vec::new(),
        }
    }

    /// Writes out the rest, redacted, flushes and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.clear();
        self.stream.finish(&mut self.out);
        self.inner.write_all(&self.out)?;
        self.inner.flush()?;
        Ok(self.inner)
    }

    /// The inner writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.clear();
        self.stream.push(buf, &mut self.out);
        // All of `buf` is taken; what is redacted must all reach `inner`.
        self.inner.write_all(&self.out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> std::fmt::Debug for RedactingWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedactingWriter")
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}
