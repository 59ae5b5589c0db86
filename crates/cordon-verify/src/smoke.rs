//! Readiness probes for startup smoke stages.

use cordon_exec::{ReadyProbe, Stream};

/// Ready when a line of output matches a regular expression.
pub(crate) struct OutputMatches {
    regex: regex::bytes::Regex,
    /// The current incomplete line (bounded).
    line: Vec<u8>,
    ready: bool,
}

const MAX_LINE: usize = 64 * 1024;

impl OutputMatches {
    pub(crate) fn new(regex: regex::bytes::Regex) -> Self {
        OutputMatches {
            regex,
            line: Vec::new(),
            ready: false,
        }
    }
}

impl ReadyProbe for OutputMatches {
    fn observe(&mut self, stream: Stream, bytes: &[u8]) {
        // `ready = { stdout = ... }` watches standard output only: an error message on
        // standard error that happens to match must not count.
        if self.ready || stream != Stream::Stdout {
            return;
        }
        for part in bytes.split_inclusive(|&b| b == b'\n') {
            if self.line.len() < MAX_LINE {
                let room = MAX_LINE - self.line.len();
                self.line.extend_from_slice(&part[..part.len().min(room)]);
            }
            let complete = part.ends_with(b"\n");
            if self.regex.is_match(&self.line) {
                self.ready = true;
                return;
            }
            if complete {
                self.line.clear();
            }
        }
    }

    fn is_ready(&mut self, _root_pid: i32) -> bool {
        self.ready
    }
}

/// Ready when a socket listens on a TCP port in the program's network namespace, as seen in
/// `/proc/<pid>/net/tcp{,6}` of the process cordon spawned (which lives in that namespace).
pub(crate) struct TcpListening {
    port: u16,
}

impl TcpListening {
    pub(crate) fn new(port: u16) -> Self {
        TcpListening { port }
    }
}

impl ReadyProbe for TcpListening {
    fn is_ready(&mut self, root_pid: i32) -> bool {
        // The sandbox helper may create the network namespace for its child rather than for
        // itself: look at the spawned process and its children.
        let mut pids = vec![root_pid];
        pids.extend(cordon_exec::children_of(root_pid));
        pids.iter().any(|pid| {
            ["tcp", "tcp6"].iter().any(|table| {
                std::fs::read_to_string(format!("/proc/{pid}/net/{table}"))
                    .is_ok_and(|text| listens_on(&text, self.port))
            })
        })
    }
}

/// Whether a `/proc/net/tcp` table has a socket in state LISTEN (`0A`) on `port`.
pub(crate) fn listens_on(table: &str, port: u16) -> bool {
    let wanted = format!("{port:04X}");
    table.lines().skip(1).any(|line| {
        let mut fields = line.split_whitespace();
        let local = fields.nth(1).unwrap_or("");
        let state = fields.nth(1).unwrap_or("");
        state == "0A" && local.rsplit(':').next() == Some(wanted.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_probe_matches_lines_split_across_chunks() {
        let mut p = OutputMatches::new(regex::bytes::Regex::new("listening on \\d+").unwrap());
        p.observe(Stream::Stdout, b"starting\nlisten");
        assert!(!p.is_ready(0));
        p.observe(Stream::Stdout, b"ing on 80");
        assert!(p.is_ready(0));
        let mut p = OutputMatches::new(regex::bytes::Regex::new("listening").unwrap());
        p.observe(Stream::Stderr, b"error: not listening\n");
        assert!(!p.is_ready(0), "stderr does not count");
    }

    #[test]
    fn parses_proc_net_tcp() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n   1: 0100007F:0050 0100007F:9999 01 00000000:00000000 00:00000000 00000000     0        0 1 1\n";
        assert!(listens_on(table, 8080));
        assert!(!listens_on(table, 80), "established, not listening");
        assert!(!listens_on(table, 9999));
    }
}
