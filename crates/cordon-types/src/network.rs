//! The `network` section of a run result: what a program reached through cordon's filtering
//! proxy, and what it was refused.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::sandbox::NetworkMode;

/// Every connection attempt a sandboxed program made through cordon's proxy
/// (`--network allow=...`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkReport {
    /// The network mode of the run (`allowlist`).
    pub mode: NetworkMode,
    /// The allowlist the proxy enforced (`HOST[:PORT]`, `*.example.org`).
    pub allow: Vec<String>,
    /// Destinations reached, one entry per host and port, in the order first reached.
    pub allowed: Vec<HostTraffic>,
    /// Connections refused, in the order they were attempted (at most
    /// [`MAX_DENIALS_REPORTED`]; `denied_omitted` counts the rest).
    pub denied: Vec<DeniedConnection>,
    /// Refusals beyond those listed in `denied`.
    #[serde(default)]
    pub denied_omitted: u64,
    /// The proxy's bounds that were reached (`connections`, `bytes`).
    #[serde(default)]
    pub limits_hit: Vec<NetworkLimit>,
}

/// The most refusals a report lists one by one.
pub const MAX_DENIALS_REPORTED: usize = 100;

/// Traffic to one allowed destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostTraffic {
    /// The host name as the program wrote it (its case kept; without a trailing dot).
    pub host: String,
    /// The destination port.
    pub port: u16,
    /// Connections made to it.
    pub connections: u64,
    /// Bytes sent by the program to the destination (request heads included).
    pub bytes_up: u64,
    /// Bytes received from the destination.
    pub bytes_down: u64,
    /// The credential the proxy adds to this destination's requests (`--credential`), by
    /// the name of the host-side variable holding it; never its value. `None`: none, and
    /// HTTPS connections to it are plain tunnels.
    #[serde(default)]
    pub credential: Option<String>,
    /// HTTP requests the proxy saw: plain HTTP requests, and the requests inside intercepted
    /// HTTPS connections (a tunnel's requests are not seen).
    #[serde(default)]
    pub requests: u64,
    /// Of those, the requests that carried the credential (every request of an intercepted
    /// connection does; plain HTTP requests never do).
    #[serde(default)]
    pub credential_requests: u64,
}

/// One refused connection attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeniedConnection {
    /// The destination host as asked for (sanitised, at most 255 bytes); empty when the
    /// request named none.
    pub host: String,
    /// The destination port, when one was named.
    pub port: Option<u16>,
    /// Why it was refused, e.g. `not in the allowlist`.
    pub reason: String,
}

/// A bound of the network proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkLimit {
    /// The most connections per run was reached; later attempts were refused.
    Connections,
    /// The most bytes per run (`--network-bytes`) was reached; connections were cut.
    Bytes,
}
