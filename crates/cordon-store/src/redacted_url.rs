//! A PostgreSQL URL as messages show it: without its password. Compiled with or without the
//! `postgres` feature, so that a store named by URL is shown the same way when this build
//! cannot open it.

/// A URL with its password replaced, for messages.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let redacted = match authority.rsplit_once('@') {
        Some((credentials, host)) => {
            let user = credentials.split(':').next().unwrap_or("");
            let hidden = if credentials.contains(':') {
                format!("{user}:***")
            } else {
                user.to_owned()
            };
            format!("{scheme}://{hidden}@{host}{tail}")
        }
        None => url.to_owned(),
    };
    hide_password_parameter(&redacted)
}

/// `…?password=secret&…` → `…?password=***&…`.
fn hide_password_parameter(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact_url("postgres://cordon:s3cret@db.internal:5432/cordon"),
            "postgres://cordon:***@db.internal:5432/cordon"
        );
        assert_eq!(
            redact_url("postgresql://me@/cordon?host=/run/pg"),
            "postgresql://me@/cordon?host=/run/pg"
        );
        assert_eq!(
            redact_url("postgres:///cordon?host=/tmp"),
            "postgres:///cordon?host=/tmp"
        );
        assert_eq!(
            redact_url("postgres://db/cordon?user=me&password=s3cret&sslmode=disable"),
            "postgres://db/cordon?user=me&password=***&sslmode=disable"
        );
    }
}
