//! The `registry` preset: the hosts the package managers' clients are configured to use,
//! read from the *user's* configuration (home directory and environment) — never from the
//! project being verified, whose `.npmrc` or `.cargo/config.toml` the candidate controls (a
//! patch could otherwise name its own host as "the registry").
//!
//! - cargo: `$CARGO_HOME/config.toml` (or `config`): crates.io's source replacement
//!   (`[source.crates-io] replace-with`, followed to the replacing source's `registry`),
//!   `[registries.*] index`, `CARGO_REGISTRIES_*_INDEX`; without a replacement crates.io's
//!   sparse index and download hosts (`index.crates.io`, `static.crates.io`; `github.com`
//!   too when crates.io's protocol is `git`).
//! - npm: `npm_config_registry` / `NPM_CONFIG_REGISTRY`, `~/.npmrc` (`registry=`,
//!   `@scope:registry=`); default `registry.npmjs.org`.
//! - pip: `PIP_INDEX_URL`, `PIP_EXTRA_INDEX_URL`, `$PIP_CONFIG_FILE`, `~/.config/pip/pip.conf`,
//!   `~/.pip/pip.conf`, `/etc/pip.conf` (`index-url`, `extra-index-url`); default `pypi.org`
//!   and `files.pythonhosted.org`.
//! - Go: `GOPROXY` (environment, else `$GOENV` or `~/.config/go/env`) and `GOSUMDB`;
//!   default `proxy.golang.org` and `sum.golang.org`. `direct` (fetching from version
//!   control) has no host to allow and is left out.

use std::path::{Path, PathBuf};

use crate::allowlist::Allowlist;

/// A package ecosystem whose client configuration the preset reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ecosystem {
    /// cargo (crates.io or the configured replacement).
    Cargo,
    /// npm (and clients reading `.npmrc`).
    Npm,
    /// pip.
    Pip,
    /// The Go module proxy.
    Go,
}

impl Ecosystem {
    /// Every ecosystem (what `--network registry` allows).
    pub const ALL: [Ecosystem; 4] = [Self::Cargo, Self::Npm, Self::Pip, Self::Go];
}

/// Where the preset reads from: the user's home and environment.
pub struct ClientConfig<'a> {
    /// The user's home directory.
    pub home: Option<&'a Path>,
    /// A variable of cordon's environment.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl ClientConfig<'_> {
    fn var(&self, name: &str) -> Option<String> {
        (self.env)(name).filter(|v| !v.trim().is_empty())
    }

    fn home_file(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.home?.join(rel)).ok()
    }
}

/// The allowlist entries (`host` or `host:port`) the configured clients of `ecosystems`
/// use, deduplicated, in a stable order.
pub fn registry_hosts(ecosystems: &[Ecosystem], config: &ClientConfig<'_>) -> Vec<String> {
    let mut hosts = Vec::new();
    for ecosystem in ecosystems {
        let found = match ecosystem {
            Ecosystem::Cargo => cargo_hosts(config),
            Ecosystem::Npm => npm_hosts(config),
            Ecosystem::Pip => pip_hosts(config),
            Ecosystem::Go => go_hosts(config),
        };
        for host in found {
            if !hosts.contains(&host) {
                hosts.push(host);
            }
        }
    }
    hosts
}

/// The preset as an allowlist, and the configured entries it cannot hold (an index given
/// by IP address: the allowlist names hosts), each with the reason.
pub fn registry_allowlist(
    ecosystems: &[Ecosystem],
    config: &ClientConfig<'_>,
) -> (Allowlist, Vec<String>) {
    let mut list = Allowlist::default();
    let mut skipped = Vec::new();
    for entry in registry_hosts(ecosystems, config) {
        match Allowlist::parse([&entry]) {
            Ok(one) => list.extend(&one),
            Err(e) => skipped.push(e.to_string()),
        }
    }
    (list, skipped)
}

/// `host` or `host:port` of a URL (`sparse+https://user:pw@host:8443/path` ->
/// `host:8443`); `None` for local paths and `file:` URLs.
pub fn url_host(url: &str) -> Option<String> {
    let url = url.trim().trim_matches('"');
    let url = url.strip_prefix("sparse+").unwrap_or(url);
    let url = url.strip_prefix("git+").unwrap_or(url);
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let split = if authority.starts_with('[') {
        authority
            .rfind("]:")
            .map(|i| (&authority[..=i], &authority[i + 2..]))
    } else {
        authority.rsplit_once(':')
    };
    let (host, port) = match split {
        Some((h, p)) => (h, Some(p.parse::<u16>().ok()?)),
        None => (authority, None),
    };
    if host.is_empty() {
        return None;
    }
    let default = if scheme.eq_ignore_ascii_case("https") {
        "443"
    } else {
        "80"
    };
    Some(match port {
        Some(p) if p.to_string() != default => format!("{}:{p}", host.to_ascii_lowercase()),
        _ => host.to_ascii_lowercase(),
    })
}

fn cargo_hosts(config: &ClientConfig<'_>) -> Vec<String> {
    let cargo_home = config
        .var("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| config.home.map(|h| h.join(".cargo")));
    let table: toml::Table = cargo_home
        .and_then(|dir| {
            std::fs::read_to_string(dir.join("config.toml"))
                .or_else(|_| std::fs::read_to_string(dir.join("config")))
                .ok()
        })
        .and_then(|text| text.parse().ok())
        .unwrap_or_default();
    let get = |path: &[&str]| -> Option<String> {
        let mut value = table.get(path[0])?;
        for key in &path[1..] {
            value = value.get(key)?;
        }
        value.as_str().map(str::to_owned)
    };
    let mut hosts = Vec::new();
    // crates.io, or what replaces it (following a chain of replacements).
    let mut source = "crates-io".to_owned();
    let mut replaced = false;
    for _ in 0..8 {
        match get(&["source", &source, "replace-with"]) {
            Some(next) => {
                source = next;
                replaced = true;
            }
            None => break,
        }
    }
    if replaced {
        let url = get(&["source", &source, "registry"])
            .or_else(|| get(&["registries", &source, "index"]));
        hosts.extend(url.as_deref().and_then(url_host));
    } else {
        hosts.push("index.crates.io".into());
        hosts.push("static.crates.io".into());
        let protocol = config
            .var("CARGO_REGISTRIES_CRATES_IO_PROTOCOL")
            .or_else(|| get(&["registries", "crates-io", "protocol"]));
        if protocol.as_deref() == Some("git") {
            hosts.push("github.com".into());
        }
    }
    if let Some(registries) = table.get("registries").and_then(|r| r.as_table()) {
        for (name, registry) in registries {
            let env_name = format!(
                "CARGO_REGISTRIES_{}_INDEX",
                name.to_ascii_uppercase().replace('-', "_")
            );
            let index = config
                .var(&env_name)
                .or_else(|| registry.get("index")?.as_str().map(str::to_owned));
            hosts.extend(index.as_deref().and_then(url_host));
        }
    }
    hosts
}

fn npm_hosts(config: &ClientConfig<'_>) -> Vec<String> {
    let mut hosts = Vec::new();
    let from_env = config
        .var("npm_config_registry")
        .or_else(|| config.var("NPM_CONFIG_REGISTRY"));
    let npmrc = config.home_file(".npmrc").unwrap_or_default();
    let mut default = from_env;
    for line in npmrc.lines().map(str::trim) {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key == "registry" {
            default = default.or_else(|| Some(value.trim().to_owned()));
        } else if key.starts_with('@') && key.ends_with(":registry") {
            hosts.extend(url_host(value));
        }
    }
    let default = default.unwrap_or_else(|| "https://registry.npmjs.org/".into());
    let mut all: Vec<String> = url_host(&default).into_iter().collect();
    all.extend(hosts);
    all
}

fn pip_hosts(config: &ClientConfig<'_>) -> Vec<String> {
    let mut index = config.var("PIP_INDEX_URL");
    let mut extra: Vec<String> = config
        .var("PIP_EXTRA_INDEX_URL")
        .map(|v| v.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let files = [
        config.var("PIP_CONFIG_FILE").map(PathBuf::from),
        config.home.map(|h| h.join(".config/pip/pip.conf")),
        config.home.map(|h| h.join(".pip/pip.conf")),
        Some(PathBuf::from("/etc/pip.conf")),
        Some(PathBuf::from("/etc/xdg/pip/pip.conf")),
    ];
    for text in files
        .into_iter()
        .flatten()
        .filter_map(|f| std::fs::read_to_string(f).ok())
    {
        for line in text.lines().map(str::trim) {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            match key.trim() {
                "index-url" | "index_url" => {
                    index = index.or_else(|| Some(value.trim().to_owned()));
                }
                "extra-index-url" | "extra_index_url" => {
                    extra.extend(value.split_whitespace().map(str::to_owned));
                }
                _ => {}
            }
        }
    }
    let mut hosts = match index {
        Some(url) => url_host(&url).into_iter().collect(),
        None => vec!["pypi.org".to_owned(), "files.pythonhosted.org".to_owned()],
    };
    hosts.extend(extra.iter().filter_map(|u| url_host(u)));
    hosts
}

fn go_hosts(config: &ClientConfig<'_>) -> Vec<String> {
    let goenv = config
        .var("GOENV")
        .map(PathBuf::from)
        .or_else(|| config.home.map(|h| h.join(".config/go/env")))
        .and_then(|f| std::fs::read_to_string(f).ok())
        .unwrap_or_default();
    let setting = |name: &str| {
        config.var(name).or_else(|| {
            goenv.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == name).then(|| v.trim().trim_matches('"').to_owned())
            })
        })
    };
    let proxy = setting("GOPROXY").unwrap_or_else(|| "https://proxy.golang.org,direct".into());
    let mut hosts: Vec<String> = proxy.split([',', '|']).filter_map(url_host).collect();
    match setting("GOSUMDB").as_deref() {
        Some("off") => {}
        None | Some("sum.golang.org") => hosts.push("sum.golang.org".into()),
        Some(other) => {
            // `name+key [url]`: the URL when given, else the name is the host.
            let mut parts = other.split_whitespace();
            let name = parts.next().unwrap_or_default();
            match parts.next() {
                Some(url) => hosts.extend(url_host(url)),
                None => hosts.push(name.split('+').next().unwrap_or(name).to_owned()),
            }
        }
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(ecosystems: &[Ecosystem], home: &Path, env: &[(&str, &str)]) -> Vec<String> {
        let lookup = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        registry_hosts(
            ecosystems,
            &ClientConfig {
                home: Some(home),
                env: &lookup,
            },
        )
    }

    #[test]
    fn urls_give_their_host_and_non_default_port() {
        assert_eq!(
            url_host("sparse+https://index.crates.io/").as_deref(),
            Some("index.crates.io")
        );
        assert_eq!(
            url_host("https://u:p@Mirror.Example:8443/simple").as_deref(),
            Some("mirror.example:8443")
        );
        assert_eq!(
            url_host("http://mirror.example:80/").as_deref(),
            Some("mirror.example")
        );
        assert_eq!(url_host("file:///srv/index"), None);
        assert_eq!(url_host("/srv/index"), None);
        assert_eq!(url_host("direct"), None);
    }

    #[test]
    fn defaults_without_configuration() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(
            hosts(&Ecosystem::ALL, home.path(), &[]),
            [
                "index.crates.io",
                "static.crates.io",
                "registry.npmjs.org",
                "pypi.org",
                "files.pythonhosted.org",
                "proxy.golang.org",
                "sum.golang.org"
            ]
        );
    }

    #[test]
    fn the_users_mirrors_replace_the_defaults() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        std::fs::create_dir_all(h.join(".cargo")).unwrap();
        std::fs::write(
            h.join(".cargo/config.toml"),
            "[source.crates-io]\nreplace-with = \"corp\"\n[source.corp]\nregistry = \"sparse+https://cargo.corp.example/index/\"\n[registries.extra]\nindex = \"https://extra.example/git\"\n",
        )
        .unwrap();
        std::fs::write(
            h.join(".npmrc"),
            "registry=https://npm.corp.example/\n@acme:registry=https://acme.example/npm/\n//npm.corp.example/:_authToken=SECRET\n",
        )
        .unwrap();
        std::fs::create_dir_all(h.join(".config/pip")).unwrap();
        std::fs::write(
            h.join(".config/pip/pip.conf"),
            "[global]\nindex-url = https://pypi.corp.example/simple\n",
        )
        .unwrap();
        let env = [
            ("GOPROXY", "https://goproxy.corp.example,direct"),
            ("GOSUMDB", "off"),
        ];
        assert_eq!(
            hosts(&Ecosystem::ALL, h, &env),
            [
                "cargo.corp.example",
                "extra.example",
                "npm.corp.example",
                "acme.example",
                "pypi.corp.example",
                "goproxy.corp.example"
            ]
        );
        // The environment wins over the files.
        let env = [
            ("PIP_INDEX_URL", "http://127.0.0.1:3141/root/pypi/+simple/"),
            ("npm_config_registry", "https://npm2.example"),
        ];
        assert_eq!(
            hosts(&[Ecosystem::Pip, Ecosystem::Npm], h, &env),
            ["127.0.0.1:3141", "npm2.example", "acme.example"]
        );
    }
}
