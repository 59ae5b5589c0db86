//! Reading and judging the head of a proxy request: `CONNECT host:port` or a plain HTTP
//! request in absolute form (`GET http://host/path`), rewritten to origin form for the
//! destination. Parsing is `httparse`'s (a well-kept, fuzzed parser); this module only
//! decides what the parsed head asks for.

/// The most bytes a request head may take; more is refused.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The most header lines a request head may have.
const MAX_HEADERS: usize = 64;

/// What a complete request head asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// A tunnel to `authority` (`host:port`).
    Connect {
        /// The CONNECT target.
        authority: String,
    },
    /// One plain HTTP request to `authority`; `head` is what goes to the destination.
    Http {
        /// `host[:port]` from the absolute URI (or the Host header).
        authority: String,
        /// The head rewritten for the destination (origin form, `Connection: close`).
        head: Vec<u8>,
    },
}

/// A head that cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The destination, when the head named one.
    pub authority: Option<String>,
    /// Why.
    pub reason: String,
}

/// Parses `buf`: `Ok(None)` when the head is not complete yet, otherwise what it asks for
/// and the length of the head (bytes after it belong to the body or the tunnel).
pub fn parse(buf: &[u8]) -> Result<Option<(Ask, usize)>, Refusal> {
    let refuse = |reason: &str| Refusal {
        authority: None,
        reason: reason.to_owned(),
    };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_BYTES => {
            return Err(refuse("request head too large"));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(refuse("too many header lines")),
        Err(e) => return Err(refuse(&format!("malformed request ({e})"))),
    };
    let method = req.method.unwrap_or_default();
    let target = req.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        return Ok(Some((
            Ask::Connect {
                authority: target.to_owned(),
            },
            len,
        )));
    }
    let (authority, path) = if let Some(rest) = strip_prefix_ci(target, "http://") {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let path = match &rest[end..] {
            "" => "/".to_owned(),
            p if p.starts_with('/') => p.to_owned(),
            p => format!("/{p}"),
        };
        (rest[..end].to_owned(), path)
    } else if target.contains("://") {
        return Err(Refusal {
            authority: None,
            reason: "only http:// requests and CONNECT tunnels are proxied".into(),
        });
    } else if target.starts_with('/') {
        let host = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("host"))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .ok_or_else(|| refuse("a request without a destination (no absolute URI, no Host)"))?;
        (host.trim().to_owned(), target.to_owned())
    } else {
        return Err(refuse("a request target that names no destination"));
    };
    if authority.contains('@') {
        return Err(Refusal {
            authority: None,
            reason: "user information in the URL".into(),
        });
    }
    let head = rewrite(method, &path, &authority, req.version, req.headers);
    Ok(Some((Ask::Http { authority, head }, len)))
}

fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// The head for the destination: origin form, the Host header set to the destination,
/// proxy and hop-by-hop connection headers dropped, `Connection: close`.
fn rewrite(
    method: &str,
    path: &str,
    authority: &str,
    version: Option<u8>,
    headers: &[httparse::Header<'_>],
) -> Vec<u8> {
    const DROPPED: [&str; 5] = [
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
    ];
    let mut head = format!(
        "{method} {path} HTTP/1.{}\r\nHost: {authority}\r\n",
        version.unwrap_or(1)
    )
    .into_bytes();
    for h in headers
        .iter()
        .filter(|h| !DROPPED.iter().any(|d| h.name.eq_ignore_ascii_case(d)))
    {
        head.extend_from_slice(h.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(h.value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_and_absolute_requests_parse() {
        let (ask, len) = parse(b"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\nxx")
            .unwrap()
            .unwrap();
        assert_eq!(
            ask,
            Ask::Connect {
                authority: "a.example:443".into()
            }
        );
        assert_eq!(len, 55);
        let (ask, _) = parse(
            b"GET http://a.example:8080/simple/?x=1 HTTP/1.1\r\nHost: evil.example\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nAccept: */*\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        let Ask::Http { authority, head } = ask else {
            panic!("not http")
        };
        assert_eq!(authority, "a.example:8080");
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /simple/?x=1 HTTP/1.1\r\nHost: a.example:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn partial_heads_wait_and_hostile_heads_are_refused() {
        assert_eq!(parse(b"CONNECT a.example:443 HTTP/1.1\r\n").unwrap(), None);
        for bad in [
            &b"GET https://a.example/ HTTP/1.1\r\n\r\n"[..],
            b"GET ftp://a.example/ HTTP/1.1\r\n\r\n",
            b"GET http://user:pw@a.example/ HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
            b"GET * HTTP/1.1\r\n\r\n",
            b"GET\x00 / HTTP/1.1\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let mut big = b"GET http://a.example/ HTTP/1.1\r\n".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES));
        assert!(parse(&big).is_err());
        let mut many = b"GET http://a.example/ HTTP/1.1\r\n".to_vec();
        for i in 0..100 {
            many.extend(format!("X-{i}: y\r\n").as_bytes());
        }
        many.extend(b"\r\n");
        assert!(parse(&many).is_err());
    }
}
