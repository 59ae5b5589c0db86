//! What an agent may do is the operator's choice, never the agent's: the bounds `cordon mcp`
//! is started with ([`Bounds`]), checked on every call before anything runs. A call asking
//! for more is refused with a tool error naming the bound; MCP roots the client declares may
//! narrow the repositories, never widen them ([`Bounds::places`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use cordon_types::NetworkRule;

use crate::failure::ToolFailure;

/// The default and most bytes of each output stream kept in a run's result.
pub const DEFAULT_OUTPUT_LIMIT: usize = 64 * 1024;

/// The most bytes of each output stream a call may ask to keep in a run's result.
pub const MAX_OUTPUT_LIMIT: usize = 1024 * 1024;

/// The bounds an agent can never exceed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    /// The most network a program may have (`--allow-network`; default none).
    pub network: NetworkRule,
    /// The longest a program or a verification may run (`--max-timeout`); also the default
    /// timeout of a program.
    pub max_timeout: Duration,
    /// The most memory a program's process tree (or a verification stage's) may use
    /// (`--memory`); also the default. `None`: no limit but the host's.
    pub memory: Option<u64>,
    /// The repositories the agent may open, canonical (`--repo`, repeatable); workspaces and
    /// sessions are reachable through the repository they were made from.
    pub repos: Vec<PathBuf>,
    /// Whether a program may run without the kernel sandbox (`--allow-no-sandbox`).
    pub allow_no_sandbox: bool,
}

impl Bounds {
    /// The bounds of `repos` (canonicalised; each must exist) and the defaults: no network,
    /// 10 minutes, no memory limit, no unsandboxed runs.
    pub fn new(repos: &[PathBuf]) -> std::io::Result<Self> {
        let repos = repos
            .iter()
            .map(|r| {
                std::fs::canonicalize(r).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("--repo {}: {e}", r.display()))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Bounds {
            network: NetworkRule::None,
            max_timeout: Duration::from_secs(600),
            memory: None,
            repos,
            allow_no_sandbox: false,
        })
    }

    /// The network bound as its flag says it.
    pub fn network_flag(&self) -> String {
        format!("--allow-network {}", network_text(&self.network))
    }

    /// Refuses a network beyond `--allow-network`.
    pub fn check_network(&self, wanted: &NetworkRule) -> Result<(), ToolFailure> {
        if self.network.permits(wanted) {
            return Ok(());
        }
        Err(ToolFailure::beyond_bound(
            &self.network_flag(),
            format!(
                "network {} is beyond the operator's bound {}",
                network_text(wanted),
                self.network_flag()
            ),
        ))
    }

    /// The timeout of a program that asked for `asked` (default: `--max-timeout`); refused
    /// beyond it.
    pub fn timeout(&self, asked: Option<&str>) -> Result<Duration, ToolFailure> {
        let Some(text) = asked else {
            return Ok(self.max_timeout);
        };
        let asked = cordon_types::units::parse_duration(text)
            .map_err(|e| ToolFailure::usage(format!("timeout {text:?}: {e}")))?;
        if asked.is_zero() {
            return Err(ToolFailure::usage("timeout must be more than 0"));
        }
        if asked > self.max_timeout {
            let flag = format!(
                "--max-timeout {}",
                humantime::format_duration(self.max_timeout)
            );
            return Err(ToolFailure::beyond_bound(
                &flag,
                format!("timeout {text} is beyond the operator's bound {flag}"),
            ));
        }
        Ok(asked)
    }

    /// The memory limit of a program that asked for `asked` (default: `--memory`); refused
    /// beyond it.
    pub fn memory(&self, asked: Option<&str>) -> Result<Option<u64>, ToolFailure> {
        let Some(text) = asked else {
            return Ok(self.memory);
        };
        let bytes = cordon_types::units::parse_size(text)
            .map_err(|e| ToolFailure::usage(format!("memory {text:?}: {e}")))?;
        if bytes == 0 {
            return Err(ToolFailure::usage("memory must be more than 0"));
        }
        match self.memory {
            Some(bound) if bytes > bound => {
                let flag = format!("--memory {}", size_text(bound));
                Err(ToolFailure::beyond_bound(
                    &flag,
                    format!("memory {text} is beyond the operator's bound {flag}"),
                ))
            }
            _ => Ok(Some(bytes)),
        }
    }

    /// Refuses a run without the sandbox unless the operator allowed it.
    pub fn check_no_sandbox(&self, asked: bool) -> Result<(), ToolFailure> {
        if asked && !self.allow_no_sandbox {
            return Err(ToolFailure::beyond_bound(
                "no --allow-no-sandbox",
                "no_sandbox is not available: the operator did not start this server with \
                 --allow-no-sandbox",
            ));
        }
        Ok(())
    }

    /// The places the agent may open: the repositories, narrowed by the client's roots when
    /// it declares any (a root inside a repository narrows it to the root; a repository
    /// inside a root stays; anything else is out).
    pub fn places(&self, roots: Option<&[PathBuf]>) -> Vec<PathBuf> {
        let Some(roots) = roots else {
            return self.repos.clone();
        };
        let mut places = Vec::new();
        for repo in &self.repos {
            for root in roots {
                let place = if root.starts_with(repo) {
                    root
                } else if repo.starts_with(root) {
                    repo
                } else {
                    continue;
                };
                if !places.contains(place) {
                    places.push(place.clone());
                }
            }
        }
        places
    }

    /// `path` resolved (symlinks included) when it lies in one of the places the agent may
    /// open; refused naming `--repo` otherwise.
    pub fn check_path(
        &self,
        what: &str,
        path: &Path,
        roots: Option<&[PathBuf]>,
    ) -> Result<PathBuf, ToolFailure> {
        let resolved = std::fs::canonicalize(path)
            .map_err(|e| ToolFailure::usage(format!("{what} {}: {e}", path.display())))?;
        let places = self.places(roots);
        if places.iter().any(|place| resolved.starts_with(place)) {
            return Ok(resolved);
        }
        Err(self.outside(what, path, &places))
    }

    /// The refusal of `path`, outside every place the agent may open.
    fn outside(&self, what: &str, path: &Path, places: &[PathBuf]) -> ToolFailure {
        let flags = self.repo_flags();
        let narrowed = if places != self.repos {
            " (narrowed by the client's roots)"
        } else {
            ""
        };
        ToolFailure::beyond_bound(
            &flags,
            format!(
                "{what} {} is outside the repositories this server may open{narrowed}: {}",
                path.display(),
                if places.is_empty() {
                    "none".to_owned()
                } else {
                    places
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        )
    }

    /// The `--repo` flags as given.
    fn repo_flags(&self) -> String {
        self.repos
            .iter()
            .map(|r| format!("--repo {}", r.display()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The place a call that names none works in: the first the agent may open.
    pub fn default_place(&self, roots: Option<&[PathBuf]>) -> Result<PathBuf, ToolFailure> {
        self.places(roots).into_iter().next().ok_or_else(|| {
            ToolFailure::beyond_bound(
                &self.repo_flags(),
                "no repository is left to open: the client's roots lie outside every --repo",
            )
        })
    }

    /// Whether a recorded path (a run's, a workspace's or a session's repository) lies in a
    /// place the agent may open.
    pub fn allows(&self, path: &Path, roots: Option<&[PathBuf]>) -> bool {
        let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        self.places(roots)
            .iter()
            .any(|place| resolved.starts_with(place))
    }
}

/// A size as people write it: `2GiB`, `512MiB`, `1000B`.
fn size_text(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// A network rule as `--allow-network` and `network` say it.
pub fn network_text(rule: &NetworkRule) -> String {
    match rule {
        NetworkRule::None => "none".to_owned(),
        NetworkRule::Registry => "registry".to_owned(),
        NetworkRule::Host => "host".to_owned(),
        NetworkRule::Allow(hosts) => hosts.join(","),
    }
}

/// Parses `--allow-network`: `none`, `registry`, `host`, or host names
/// (`HOST[:PORT][,HOST...]`, `*.example.org`).
pub fn parse_network_bound(text: &str) -> Result<NetworkRule, String> {
    match text {
        "none" => Ok(NetworkRule::None),
        "registry" => Ok(NetworkRule::Registry),
        "host" => Ok(NetworkRule::Host),
        _ => {
            let hosts: Vec<String> = text
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
                .collect();
            if hosts.is_empty() {
                return Err("expected none, registry, host or HOST[:PORT][,HOST...]".into());
            }
            for host in &hosts {
                cordon_proxy_check(host)?;
            }
            Ok(NetworkRule::Allow(hosts))
        }
    }
}

/// Checks one allow-list entry the way the sandbox's proxy will read it.
fn cordon_proxy_check(host: &str) -> Result<(), String> {
    cordon_runner::SandboxOptions::with_network(&NetworkRule::Allow(vec![host.to_owned()]))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(repos: &[&str]) -> Bounds {
        Bounds {
            network: NetworkRule::Registry,
            max_timeout: Duration::from_secs(60),
            memory: Some(1 << 30),
            repos: repos.iter().map(PathBuf::from).collect(),
            allow_no_sandbox: false,
        }
    }

    #[test]
    fn roots_narrow_but_never_widen() {
        let b = bounds(&["/src/app", "/src/lib"]);
        assert_eq!(
            b.places(None),
            [PathBuf::from("/src/app"), "/src/lib".into()]
        );
        // A root inside a repository narrows it; a root around one keeps it; others are out.
        let roots = [PathBuf::from("/src/app/web"), "/src".into(), "/etc".into()];
        assert_eq!(
            b.places(Some(&roots)),
            [
                PathBuf::from("/src/app/web"),
                "/src/app".into(),
                "/src/lib".into()
            ]
        );
        assert!(b.places(Some(&[PathBuf::from("/home")])).is_empty());
    }

    #[test]
    fn asking_beyond_a_bound_is_refused_naming_it() {
        let b = bounds(&["/src/app"]);
        let refused = b.timeout(Some("2m")).unwrap_err();
        assert!(
            refused.document.message.contains("--max-timeout 1m"),
            "{refused:?}"
        );
        assert_eq!(b.timeout(None).unwrap(), Duration::from_secs(60));
        assert_eq!(b.timeout(Some("5s")).unwrap(), Duration::from_secs(5));
        assert!(b.check_network(&NetworkRule::Registry).is_ok());
        let refused = b.check_network(&NetworkRule::Host).unwrap_err();
        assert!(
            refused
                .document
                .message
                .contains("network host is beyond the operator's bound --allow-network registry"),
            "{refused:?}"
        );
        assert!(b.memory(Some("2GiB")).is_err());
        assert_eq!(b.memory(None).unwrap(), Some(1 << 30));
        assert!(b.check_no_sandbox(true).is_err());
        assert!(b.check_no_sandbox(false).is_ok());
    }

    #[test]
    fn network_bounds_parse() {
        assert_eq!(parse_network_bound("registry"), Ok(NetworkRule::Registry));
        assert_eq!(
            parse_network_bound("a.test, *.b.test:8443"),
            Ok(NetworkRule::Allow(vec![
                "a.test".into(),
                "*.b.test:8443".into()
            ]))
        );
        assert!(parse_network_bound(",").is_err());
    }
}
