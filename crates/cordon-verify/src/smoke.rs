//! Readiness probes for startup smoke stages.

use std::collections::HashSet;

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

/// Ready when a process of the stage's own tree holds a socket listening on a TCP port.
///
/// The listening sockets on the port are read from `/proc/<pid>/net/tcp{,6}` of the tree's
/// processes (each table once per network namespace: the sandbox's own, or the host's when the
/// stage has network), and a socket counts only when one of the tree's processes holds it
/// (`/proc/<pid>/fd/* -> socket:[inode]`). Another process listening on the same port — on the
/// host, or a daemon that left the tree — never makes the stage ready.
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
        let tree = cordon_exec::descendants_of(root_pid);
        let mut namespaces = HashSet::new();
        let mut listening = HashSet::new();
        for pid in &tree {
            let Ok(namespace) = std::fs::read_link(format!("/proc/{pid}/ns/net")) else {
                continue;
            };
            if !namespaces.insert(namespace) {
                continue;
            }
            for table in ["tcp", "tcp6"] {
                if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) {
                    listening.extend(listening_inodes(&text, self.port));
                }
            }
        }
        !listening.is_empty() && tree.iter().any(|pid| holds_any_socket(*pid, &listening))
    }
}

/// The inodes of the sockets in state LISTEN (`0A`) on `port` in a `/proc/net/tcp` table.
pub(crate) fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    let wanted = format!("{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local = fields.get(1)?;
            let state = fields.get(3)?;
            let inode: u64 = fields.get(9)?.parse().ok()?;
            (*state == "0A" && local.rsplit(':').next() == Some(wanted.as_str()) && inode != 0)
                .then_some(inode)
        })
        .collect()
}

/// Whether process `pid` has an open descriptor on one of the sockets `inodes`.
fn holds_any_socket(pid: i32, inodes: &HashSet<u64>) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok())
                .is_some_and(|inode| inodes.contains(&inode))
        })
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
        assert_eq!(listening_inodes(table, 8080), vec![1]);
        assert!(
            listening_inodes(table, 80).is_empty(),
            "established, not listening"
        );
        assert!(listening_inodes(table, 9999).is_empty());
        assert!(listening_inodes("garbage\n 0: x y 0A", 80).is_empty());
    }

    /// Issue 19 item 3: a socket listening in the same network namespace but held by a
    /// process outside the probed tree does not make the tree ready.
    #[test]
    fn only_a_socket_the_tree_holds_counts() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut other = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let other_pid = i32::try_from(other.id()).unwrap();
        assert!(
            !TcpListening::new(port).is_ready(other_pid),
            "a process that does not hold the socket is not ready"
        );
        assert!(TcpListening::new(port).is_ready(i32::try_from(std::process::id()).unwrap()));
        drop(listener);
        assert!(!TcpListening::new(port).is_ready(i32::try_from(std::process::id()).unwrap()));
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
