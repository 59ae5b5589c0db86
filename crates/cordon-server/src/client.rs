//! A small blocking client of the job service (what `cordon jobs` uses): HTTP/1.1 over a
//! plain TCP connection or a Unix socket, one request per connection, no async runtime.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// Why a request to the service failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server URL is not `http://HOST:PORT` or `unix:/PATH`.
    #[error("the server URL {0:?} is not http://HOST:PORT or unix:/PATH")]
    Url(String),
    /// The connection failed.
    #[error("cannot reach {server}")]
    Connect {
        /// The server.
        server: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The answer is not HTTP.
    #[error("the server's answer is not HTTP: {0}")]
    Protocol(String),
}

/// A client of one server with one token.
#[derive(Debug, Clone)]
pub struct Client {
    authority: String,
    socket: Option<std::path::PathBuf>,
    token: String,
}

/// A connection: TCP or a Unix socket.
trait Connection: Read + Write {}
impl<T: Read + Write> Connection for T {}

/// An answer: the status and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl Client {
    /// A client of `server` (`http://HOST:PORT`, or `unix:/PATH` for a server listening on
    /// a Unix socket) using `token`.
    pub fn new(server: &str, token: &str) -> Result<Self, ClientError> {
        if let Some(path) = server.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(ClientError::Url(server.to_owned()));
            }
            return Ok(Client {
                authority: "localhost".to_owned(),
                socket: Some(path.into()),
                token: token.to_owned(),
            });
        }
        let authority = server
            .strip_prefix("http://")
            .map(|s| s.trim_end_matches('/'))
            .filter(|s| !s.is_empty() && !s.contains('/'))
            .ok_or_else(|| ClientError::Url(server.to_owned()))?;
        Ok(Client {
            authority: authority.to_owned(),
            socket: None,
            token: token.to_owned(),
        })
    }

    fn connect(
        &self,
        method: &str,
        path: &str,
        extra: &str,
        body: &[u8],
    ) -> Result<Box<dyn Connection>, ClientError> {
        let connect = |source| ClientError::Connect {
            server: match &self.socket {
                Some(path) => format!("unix:{}", path.display()),
                None => self.authority.clone(),
            },
            source,
        };
        let mut stream: Box<dyn Connection> = match &self.socket {
            Some(path) => Box::new(std::os::unix::net::UnixStream::connect(path).map_err(connect)?),
            None => Box::new(TcpStream::connect(&self.authority).map_err(connect)?),
        };
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
            self.authority,
            self.token,
            body.len()
        );
        stream.write_all(head.as_bytes()).map_err(connect)?;
        stream.write_all(body).map_err(connect)?;
        Ok(stream)
    }

    /// Sends one request and reads the whole answer.
    pub fn request(&self, method: &str, path: &str, body: &[u8]) -> Result<Answer, ClientError> {
        let mut stream = self.connect(method, path, "", body)?;
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| ClientError::Protocol("no header end".into()))?;
        let head = String::from_utf8_lossy(&raw[..split]).to_string();
        let status = head
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ClientError::Protocol(head.clone()))?;
        let mut body = raw[split + 4..].to_vec();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body = dechunk(&body);
        }
        Ok(Answer { status, body })
    }

    /// Follows a job's live log from after event `after`, feeding `(id, event, data)` to
    /// `each` until the `end` event, the end of the stream, or `each` returns false.
    /// Returns the HTTP status.
    pub fn follow(
        &self,
        job: &str,
        after: Option<u64>,
        each: &mut dyn FnMut(u64, &str, &serde_json::Value) -> bool,
    ) -> Result<u16, ClientError> {
        let resume = after.map_or(String::new(), |a| format!("Last-Event-ID: {a}\r\n"));
        let stream = self.connect("GET", &format!("/v1/jobs/{job}/events"), &resume, b"")?;
        let mut lines = BufReader::new(stream).lines();
        let status_line = lines
            .next()
            .and_then(Result::ok)
            .ok_or_else(|| ClientError::Protocol("no status line".into()))?;
        let status: u16 = status_line
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ClientError::Protocol(status_line.clone()))?;
        if status != 200 {
            return Ok(status);
        }
        let (mut seq, mut name, mut data) = (0, String::new(), String::new());
        for line in lines {
            let Ok(line) = line else { break };
            if let Some(v) = line.strip_prefix("id: ") {
                seq = v.trim().parse().unwrap_or(seq);
            } else if let Some(v) = line.strip_prefix("event: ") {
                name = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = v.to_owned();
            } else if line.is_empty() && !name.is_empty() {
                let value = serde_json::from_str(&data).unwrap_or(serde_json::Value::Null);
                let end = name == "end";
                if !each(seq, &name, &value) || end {
                    break;
                }
                name.clear();
            }
        }
        Ok(status)
    }
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 || body.len() < eol + 2 + size {
            break;
        }
        out.extend_from_slice(&body[eol + 2..eol + 2 + size]);
        body = &body[(eol + 4 + size).min(body.len())..];
    }
    out
}
