//! The filtering proxy between a sandboxed program and the network.
//!
//! With `--network allow=HOST,...` the program's network namespace stays private (loopback
//! only, no route out, no DNS resolver). The sandbox helper makes a listening TCP socket
//! inside that namespace (`127.0.0.1:3128`) and sends it to cordon over an inherited
//! Unix socket ([`cordon_types::CHILD_NETWORK_FD`]); this crate's proxy, a few threads in
//! cordon living exactly as long as the run ([`start`] … [`ProxyHandle::finish`]), accepts
//! the program's connections there and dials out from the host's namespace.
//!
//! For each connection the proxy:
//!
//! 1. reads one request head within a deadline ([`ProxySettings::head_timeout`]):
//!    `CONNECT host:port` (a tunnel: HTTPS, git over HTTPS) or a plain HTTP request in
//!    absolute form (`GET http://host/path`), parsed by `httparse`;
//! 2. refuses IP literals (`10.0.0.1`, `[::1]`, `2130706433`): the [`Allowlist`] names hosts;
//! 3. refuses names the allowlist does not list (`HOST[:PORT]`, `*.example.org`; a rule
//!    without a port allows 80 and 443);
//! 4. resolves the name itself and drops every address in loopback, private, CGNAT,
//!    link-local (cloud metadata), multicast, reserved or unspecified ranges, IPv4-mapped
//!    forms included (a listed name that resolves there — DNS rebinding — is refused);
//! 5. connects to an address it checked (pinned: no second resolution), and relays within
//!    the run's bounds: bytes ([`ProxySettings::max_bytes`]), connections
//!    ([`ProxySettings::max_connections`], at most [`MAX_OPEN_CONNECTIONS`] at once), idle
//!    time ([`ProxySettings::idle_timeout`]).
//!
//! Everything is accounted in a [`cordon_types::NetworkReport`]: traffic per host and port,
//! every refusal with its reason, the bounds reached.
//!
//! **Credentials** ([`Credential`], `--credential HOST=NAME[:HOW]`): the program never holds
//! them. For a CONNECT to a credential's host the proxy does not tunnel: it answers the
//! program's TLS itself with a certificate of the run's own authority ([`Interception`]: made
//! in memory for this run, its key never written anywhere; the program trusts it through the
//! bundle of [`Interception::ca_bundle`]), speaks TLS to the real server verified against the
//! host's [`TrustStore`], sets the credential's header on every request (replacing the
//! program's own header of that name) and hides the credential in what comes back. Every
//! other host stays a plain tunnel.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod address;
mod allowlist;
mod credential;
mod error;
mod hooks;
mod host;
mod intercept;
mod registry;
mod relay;
mod request;
mod server;
mod settings;

pub use address::refusal as address_refusal;
pub use allowlist::{Allowlist, AllowlistError, DEFAULT_PORTS, HostRule};
pub use credential::{
    CREDENTIAL_DEFAULT_PORT, Credential, CredentialError, CredentialErrorKind, HeldCredential,
    Injection, placeholder,
};
pub use error::ProxyError;
pub use hooks::{HOOKS_ENV, TestHooks};
pub use intercept::{InterceptError, Interception, TrustStore};
pub use registry::{ClientConfig, Ecosystem, registry_allowlist, registry_hosts, url_host};
#[cfg(feature = "test-hooks")]
pub use server::start_for_tests;
pub use server::{Companions, Listener, Notice, ProxyHandle, describe, start};
pub use settings::{
    DEFAULT_MAX_BYTES, DEFAULT_MAX_CONNECTIONS, MAX_OPEN_CONNECTIONS, ProxySettings,
};
