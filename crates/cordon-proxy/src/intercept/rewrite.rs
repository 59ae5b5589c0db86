//! The program's requests inside an intercepted connection, on their way to the credential's
//! host: each request head gets the credential's header (any header of that name the
//! program sent is dropped) and asks for an uncompressed answer (so that an echoed credential
//! can be found and hidden); bodies pass unchanged, framed by `Content-Length` or chunked
//! encoding to find the next head. After a request that changes protocols (`Upgrade`,
//! `CONNECT`) the rest passes unchanged and carries no credential.

use crate::credential::HeldCredential;
use crate::request::MAX_HEAD_BYTES;

/// The most header lines a request head may have.
const MAX_HEADERS: usize = 100;

/// Where the stream is.
#[derive(Debug)]
enum State {
    /// Reading a request head.
    Head(Vec<u8>),
    /// In a body of known length: bytes left.
    Body(u64),
    /// In a chunked body.
    Chunked(Chunk),
    /// Past a protocol change: bytes pass as they are.
    Opaque,
}

/// Where a chunked body is.
#[derive(Debug)]
enum Chunk {
    /// Reading a chunk-size line (what was read of it).
    Size(Vec<u8>),
    /// Inside a chunk's data: bytes left, then its CRLF.
    Data(u64),
    /// The CRLF after a chunk's data: bytes left of it.
    DataEnd(u8),
    /// Reading the trailer section, line by line (what was read of the current line).
    Trailer(Vec<u8>),
}

/// A request stream that cannot be served: the connection ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) &'static str);

/// Rewrites one connection's request stream.
#[derive(Debug)]
pub(crate) struct Rewriter<'a> {
    credentials: Vec<&'a HeldCredential>,
    state: State,
    /// Request heads rewritten so far.
    pub(crate) requests: u64,
}

impl<'a> Rewriter<'a> {
    /// A rewriter adding `credentials` (those of this host and port) to every request.
    pub(crate) fn new(credentials: Vec<&'a HeldCredential>) -> Self {
        Rewriter {
            credentials,
            state: State::Head(Vec::new()),
            requests: 0,
        }
    }

    /// Takes the program's next bytes and appends what goes to the server to `out`.
    pub(crate) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), Malformed> {
        while !input.is_empty() {
            let used = match &mut self.state {
                State::Opaque => {
                    out.extend_from_slice(input);
                    input.len()
                }
                State::Body(left) => {
                    let n = usize::try_from(*left)
                        .unwrap_or(usize::MAX)
                        .min(input.len());
                    out.extend_from_slice(&input[..n]);
                    *left -= n as u64;
                    if *left == 0 {
                        self.state = State::Head(Vec::new());
                    }
                    n
                }
                State::Chunked(chunk) => {
                    let (used, done) = chunked(chunk, input)?;
                    out.extend_from_slice(&input[..used]);
                    if done {
                        self.state = State::Head(Vec::new());
                    }
                    used
                }
                State::Head(buf) => {
                    // Bytes are taken one head at a time: what follows the head belongs to
                    // the body or the next request.
                    let before = buf.len();
                    buf.extend_from_slice(input);
                    match self.head(out)? {
                        Some(head_len) => head_len - before,
                        None => input.len(),
                    }
                }
            };
            input = &input[used..];
        }
        Ok(())
    }

    /// Parses the head being read; when complete, writes it rewritten, moves to its body and
    /// returns its length.
    fn head(&mut self, out: &mut Vec<u8>) -> Result<Option<usize>, Malformed> {
        let State::Head(buf) = &self.state else {
            return Ok(None);
        };
        // Blank lines before a request are tolerated (RFC 9112, 2.2).
        let skip = buf
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let len = match req.parse(&buf[skip..]) {
            Ok(httparse::Status::Complete(len)) => skip + len,
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_BYTES => {
                return Err(Malformed("request head too large"));
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(Malformed("malformed request")),
        };
        let method = req.method.unwrap_or_default();
        let mut chunked = false;
        let mut length: Option<u64> = None;
        let mut upgrade = method.eq_ignore_ascii_case("CONNECT");
        for h in req.headers.iter() {
            let value = std::str::from_utf8(h.value).unwrap_or_default();
            if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked |= value
                    .rsplit(',')
                    .next()
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("chunked"));
            } else if h.name.eq_ignore_ascii_case("content-length") {
                let n: u64 = value
                    .trim()
                    .parse()
                    .map_err(|_| Malformed("a bad Content-Length"))?;
                if length.is_some_and(|l| l != n) {
                    return Err(Malformed("two different Content-Length headers"));
                }
                length = Some(n);
            } else if h.name.eq_ignore_ascii_case("upgrade") {
                upgrade = true;
            }
        }
        if chunked && length.is_some() {
            return Err(Malformed("both Transfer-Encoding and Content-Length"));
        }
        out.extend_from_slice(
            format!(
                "{method} {} HTTP/1.{}\r\n",
                req.path.unwrap_or("/"),
                req.version.unwrap_or(1)
            )
            .as_bytes(),
        );
        let replaced = |name: &str| {
            name.eq_ignore_ascii_case("accept-encoding")
                || self
                    .credentials
                    .iter()
                    .any(|c| c.header().0.eq_ignore_ascii_case(name))
        };
        for h in req.headers.iter().filter(|h| !replaced(h.name)) {
            out.extend_from_slice(h.name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(h.value);
            out.extend_from_slice(b"\r\n");
        }
        for c in &self.credentials {
            let (name, value) = c.header();
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        out.extend_from_slice(b"Accept-Encoding: identity\r\n\r\n");
        self.requests += 1;
        self.state = if upgrade {
            State::Opaque
        } else if chunked {
            State::Chunked(Chunk::Size(Vec::new()))
        } else {
            match length {
                Some(n) if n > 0 => State::Body(n),
                _ => State::Head(Vec::new()),
            }
        };
        Ok(Some(len))
    }
}

/// Follows a chunked body through `input`: how many bytes of it belong to the body, and
/// whether the body ended there.
fn chunked(chunk: &mut Chunk, input: &[u8]) -> Result<(usize, bool), Malformed> {
    let mut at = 0;
    while at < input.len() {
        let trailer = matches!(chunk, Chunk::Trailer(_));
        match chunk {
            Chunk::Data(left) => {
                let n = usize::try_from(*left)
                    .unwrap_or(usize::MAX)
                    .min(input.len() - at);
                at += n;
                *left -= n as u64;
                if *left == 0 {
                    *chunk = Chunk::DataEnd(2);
                }
            }
            Chunk::DataEnd(left) => {
                at += 1;
                *left -= 1;
                if *left == 0 {
                    *chunk = Chunk::Size(Vec::new());
                }
            }
            Chunk::Size(line) | Chunk::Trailer(line) => {
                let byte = input[at];
                at += 1;
                line.push(byte);
                if line.len() > 4096 {
                    return Err(Malformed("a chunk line too long"));
                }
                if byte != b'\n' {
                    continue;
                }
                let text = std::str::from_utf8(line).map_err(|_| Malformed("a bad chunk line"))?;
                let text = text.trim_end_matches(['\r', '\n']);
                if trailer {
                    if text.is_empty() {
                        return Ok((at, true));
                    }
                    line.clear();
                    continue;
                }
                let size = text.split(';').next().unwrap_or_default().trim();
                let size =
                    u64::from_str_radix(size, 16).map_err(|_| Malformed("a bad chunk size"))?;
                *chunk = if size == 0 {
                    Chunk::Trailer(Vec::new())
                } else {
                    Chunk::Data(size)
                };
            }
        }
    }
    Ok((at, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credential::Credential;

    fn held(spec: &str, value: &str) -> HeldCredential {
        HeldCredential::new(Credential::parse(spec).unwrap(), value).unwrap()
    }

    fn rewrite(creds: &[HeldCredential], pieces: &[&[u8]]) -> (String, u64) {
        let mut r = Rewriter::new(creds.iter().collect());
        let mut out = Vec::new();
        for p in pieces {
            r.feed(p, &mut out).unwrap();
        }
        (String::from_utf8(out).unwrap(), r.requests)
    }

    #[test]
    fn every_head_gets_the_header_replacing_the_programs_own() {
        let creds = [held("a.example=K", "real-key")];
        let stream = b"POST /v1/x HTTP/1.1\r\nHost: a.example\r\nauthorization: Bearer cordon-credential-1\r\nAccept-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhelloGET /two HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\nGET /three HTTP/1.1\r\nHost: a.example\r\nAuthorization: x\r\n\r\n";
        let expected = "POST /v1/x HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\nAuthorization: Bearer real-key\r\nAccept-Encoding: identity\r\n\r\nhelloGET /two HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer real-key\r\nAccept-Encoding: identity\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\nGET /three HTTP/1.1\r\nHost: a.example\r\nAuthorization: Bearer real-key\r\nAccept-Encoding: identity\r\n\r\n";
        assert_eq!(rewrite(&creds, &[stream]), (expected.to_owned(), 3));
        // The same, a byte at a time.
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(rewrite(&creds, &bytes), (expected.to_owned(), 3));
    }

    #[test]
    fn a_body_that_looks_like_a_request_is_not_rewritten() {
        let creds = [held("a.example=K:header:x-api-key:{}", "v")];
        let body = b"GET /inner HTTP/1.1\r\n\r\n";
        let mut stream =
            format!("PUT / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        stream.extend_from_slice(body);
        let (out, requests) = rewrite(&creds, &[&stream]);
        assert_eq!(requests, 1);
        assert!(
            out.ends_with(
                "x-api-key: v\r\nAccept-Encoding: identity\r\n\r\nGET /inner HTTP/1.1\r\n\r\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn after_an_upgrade_bytes_pass_unchanged() {
        let creds = [held("a.example=K", "v")];
        let (out, requests) = rewrite(
            &creds,
            &[b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\nGET / HTTP/1.1\r\n\r\n"],
        );
        assert_eq!(requests, 1);
        assert!(out.ends_with("\r\n\r\nGET / HTTP/1.1\r\n\r\n"), "{out}");
    }

    #[test]
    fn ambiguous_framing_ends_the_connection() {
        let creds = [held("a.example=K", "v")];
        for bad in [
            &b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            b"GET\x00 / HTTP/1.1\r\n\r\n",
        ] {
            let mut r = Rewriter::new(creds.iter().collect());
            assert!(r.feed(bad, &mut Vec::new()).is_err(), "{bad:?}");
        }
    }
}
