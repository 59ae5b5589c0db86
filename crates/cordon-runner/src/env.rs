//! The program's environment: one allow-list for every caller.

use cordon_sandbox::EnvVar;

use crate::error::{RunError, RunErrorKind};

/// Variables that pass from cordon's environment into a sandboxed program (plus every
/// `LC_*`). Everything else — tokens, cloud credentials, `SSH_AUTH_SOCK`, proxies — stays
/// out unless the caller sets it explicitly or names it as a secret.
pub const ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "COLORTERM",
    "NO_COLOR",
    "USER",
    "LOGNAME",
    "RUSTUP_TOOLCHAIN",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_TERM_COLOR",
    "CARGO_BUILD_JOBS",
    "CARGO_INCREMENTAL",
    "GOFLAGS",
    "GOROOT",
    "GOPATH",
    "GOTOOLCHAIN",
    "PYTHONDONTWRITEBYTECODE",
];

/// Whether `name` passes from cordon's environment by default.
pub fn is_allowed(name: &str) -> bool {
    ENV_ALLOWLIST.contains(&name) || name.starts_with("LC_")
}

/// The program's environment: the allow-listed part of `host` (cordon's own environment),
/// then `set` (later values win), then each secret named in `secrets` with its value from
/// `provided` (secrets the caller holds, e.g. the job service's secrets file), else from
/// `host`, marked secret (redacted from all output).
///
/// Fails when a named secret is in neither: running without it would fail later and less
/// clearly.
pub fn program_env<K, V>(
    host: &[(K, V)],
    set: &[(String, String)],
    secrets: &[String],
    provided: &[(String, String)],
) -> Result<Vec<EnvVar>, RunError>
where
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut env: Vec<EnvVar> = host
        .iter()
        .filter(|(k, _)| is_allowed(k.as_ref()))
        .map(|(name, value)| EnvVar {
            name: name.as_ref().to_owned(),
            value: value.as_ref().to_owned(),
            secret: false,
        })
        .collect();
    let mut put = |name: &str, value: &str, secret: bool| {
        env.retain(|v| v.name != name);
        env.push(EnvVar {
            name: name.to_owned(),
            value: value.to_owned(),
            secret,
        });
    };
    for (name, value) in set {
        put(name, value, false);
    }
    for name in secrets {
        let value = provided
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(host.iter().map(|(k, v)| (k.as_ref(), v.as_ref())))
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .ok_or_else(|| RunError::new(RunErrorKind::MissingSecret(name.clone())))?;
        put(name, value, true);
    }
    Ok(env)
}

/// cordon's own environment as UTF-8 pairs (a variable that is not UTF-8 is left out rather
/// than passed mangled).
pub(crate) fn host_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allow_list_then_set_variables_then_secrets() {
        let host = [
            ("PATH", "/bin"),
            ("LC_ALL", "C"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("HOME", "/root"),
            ("TOKEN", "t0k"),
        ];
        let env = program_env(
            &host,
            &[("A".into(), "1".into()), ("PATH".into(), "/usr/bin".into())],
            &["TOKEN".into()],
            &[],
        )
        .unwrap();
        let got: Vec<(&str, &str, bool)> = env
            .iter()
            .map(|v| (v.name.as_str(), v.value.as_str(), v.secret))
            .collect();
        assert_eq!(
            got,
            [
                ("LC_ALL", "C", false),
                ("A", "1", false),
                ("PATH", "/usr/bin", false),
                ("TOKEN", "t0k", true),
            ]
        );
    }

    #[test]
    fn provided_secrets_come_before_cordons_environment() {
        let host = [("TOKEN", "from-env")];
        let env = program_env(
            &host,
            &[],
            &["TOKEN".into(), "FILE_ONLY".into()],
            &[
                ("TOKEN".into(), "from-file".into()),
                ("FILE_ONLY".into(), "f1".into()),
                ("UNASKED".into(), "u".into()),
            ],
        )
        .unwrap();
        let got: Vec<(&str, &str, bool)> = env
            .iter()
            .map(|v| (v.name.as_str(), v.value.as_str(), v.secret))
            .collect();
        assert_eq!(
            got,
            [("TOKEN", "from-file", true), ("FILE_ONLY", "f1", true)]
        );
    }

    #[test]
    fn a_missing_secret_is_an_error_naming_it() {
        let err = program_env(
            &Vec::<(String, String)>::new(),
            &[],
            &["MISSING".into()],
            &[],
        )
        .unwrap_err();
        assert!(matches!(err.kind(), RunErrorKind::MissingSecret(n) if n == "MISSING"));
        assert!(err.to_string().contains("MISSING is not set"), "{err}");
    }
}
