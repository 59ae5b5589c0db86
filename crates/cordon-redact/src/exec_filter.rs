//! A [`Redactor`] as the output filter of a `cordon-exec` run: one stream redactor per output
//! stream, so nothing is shown, captured or stored before it was redacted.

use cordon_exec::{OutputFilter, Stream};

use crate::{Redactor, StreamRedactor};

/// Redacts a run's stdout and stderr independently (a secret split across the two streams is
/// not one secret).
pub struct ExecFilter {
    stdout: StreamRedactor,
    stderr: StreamRedactor,
}

impl ExecFilter {
    /// A filter for one run.
    pub fn new(redactor: &Redactor) -> Self {
        ExecFilter {
            stdout: redactor.stream(),
            stderr: redactor.stream(),
        }
    }

    fn of(&mut self, stream: Stream) -> &mut StreamRedactor {
        match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        }
    }
}

impl OutputFilter for ExecFilter {
    fn filter(&mut self, stream: Stream, input: &[u8], out: &mut Vec<u8>) {
        self.of(stream).push(input, out);
    }

    fn flush(&mut self, stream: Stream, out: &mut Vec<u8>) {
        self.of(stream).finish(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RedactorBuilder;

    #[test]
    fn redacts_each_stream_across_chunks() {
        let mut builder = RedactorBuilder::new();
        builder.add_secret("API_TOKEN", "s3cr3t-value-123");
        let redactor = builder.build().unwrap();
        let mut filter = ExecFilter::new(&redactor);
        let mut out = Vec::new();
        filter.filter(Stream::Stdout, b"token=s3cr3t-va", &mut out);
        filter.filter(Stream::Stdout, b"lue-123 done", &mut out);
        filter.flush(Stream::Stdout, &mut out);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "token=[REDACTED:API_TOKEN] done");
    }
}
