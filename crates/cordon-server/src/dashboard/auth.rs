//! Logging in with an API token. The login form takes a token (the same the API takes); the
//! server keeps, under a random id, the token's hash, a CSRF token and an expiry, and gives
//! the browser only the id, in a cookie that scripts cannot read (`HttpOnly`), that no other
//! site's page sends (`SameSite=Strict`), and that travels only over TLS when the server is
//! reached over TLS (`Secure`, from `X-Forwarded-Proto: https` of a TLS proxy in front).
//! Every request looks the token up again, so a revoked or expired token ends its logins at
//! once. Logins live in the server's memory: a restart logs everyone out.
//!
//! A change (cancel, log out) must come as a POST from a page of this origin: with the
//! login's CSRF token in the form, and, when the browser says where it comes from (`Origin`,
//! `Sec-Fetch-Site`), from this origin.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Form;
use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cordon_store::TokenRow;
use maud::{Markup, html};
use serde::Deserialize;

use super::error::PageError;
use super::{Dashboard, layout};
use crate::http::blocking;
use crate::service::{now_ms, require, token_hash};

/// The cookie that names a login.
const COOKIE: &str = "cordon_dash";
/// A login lasts at most this long (less when its token expires sooner).
const LIFETIME_MS: i64 = 12 * 60 * 60 * 1000;
/// At most this many logins are kept; beyond, the one closest to its end goes.
const MAX_LOGINS: usize = 10_000;
/// At most this many logins per token; beyond, that token's login closest to its end goes (so
/// one token logging in again and again cannot push other people's logins out).
const MAX_LOGINS_PER_TOKEN: usize = 16;

/// The logins of this server process.
#[derive(Debug, Default)]
pub(crate) struct Logins(Mutex<HashMap<String, Login>>);

#[derive(Debug, Clone)]
struct Login {
    token_hash: String,
    csrf: String,
    expires_at_ms: i64,
}

impl Logins {
    /// A new login for the token with `token_hash`: returns its id and CSRF token.
    fn create(&self, token_hash: String, expires_at_ms: i64) -> Option<(String, String)> {
        let (id, csrf) = (random_hex()?, random_hex()?);
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_ms();
        map.retain(|_, l| l.expires_at_ms > now);
        let same_token = map.values().filter(|l| l.token_hash == token_hash).count();
        let evict = if same_token >= MAX_LOGINS_PER_TOKEN {
            map.iter()
                .filter(|(_, l)| l.token_hash == token_hash)
                .min_by_key(|(_, l)| l.expires_at_ms)
        } else if map.len() >= MAX_LOGINS {
            map.iter().min_by_key(|(_, l)| l.expires_at_ms)
        } else {
            None
        };
        if let Some(first) = evict.map(|(k, _)| k.clone()) {
            map.remove(&first);
        }
        map.insert(
            id.clone(),
            Login {
                token_hash,
                csrf: csrf.clone(),
                expires_at_ms,
            },
        );
        Some((id, csrf))
    }

    fn get(&self, id: &str) -> Option<Login> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(id) {
            Some(login) if login.expires_at_ms > now_ms() => Some(login.clone()),
            Some(_) => {
                map.remove(id);
                None
            }
            None => None,
        }
    }

    fn remove(&self, id: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }
}

/// 32 random bytes as hex.
fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether two secrets are equal, in time independent of where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The login id in the request's cookies.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// The person looking: the token they logged in with, and their login's CSRF token.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    /// The token (looked up again for this request).
    pub token: TokenRow,
    /// The login's CSRF token, for the forms of the page.
    pub csrf: String,
    /// The SHA-256 of the token's secret (to look it up again while a live log streams).
    pub token_hash: String,
}

impl Viewer {
    /// Whether the token may cancel jobs.
    pub fn may_cancel(&self) -> bool {
        require(&self.token, "submit").is_ok()
    }

    /// Whether the token sees every project.
    pub fn is_operator(&self) -> bool {
        crate::access::is_operator(&self.token)
    }
}

/// Paths that scripts fetch: they get a 401 rather than the way to the login form.
fn fetched_by_script(path: &str) -> bool {
    path.starts_with("/fragments/") || path.ends_with("/summary") || path.ends_with("/live")
}

impl FromRequestParts<Arc<Dashboard>> for Viewer {
    type Rejection = PageError;

    async fn from_request_parts(
        parts: &mut Parts,
        dash: &Arc<Dashboard>,
    ) -> Result<Self, Self::Rejection> {
        let denied = || {
            if fetched_by_script(parts.uri.path()) {
                PageError::Unauthorized
            } else {
                let next = parts
                    .uri
                    .path_and_query()
                    .map_or("/", |p| p.as_str())
                    .to_owned();
                PageError::Login { next }
            }
        };
        let Some(id) = cookie(&parts.headers) else {
            return Err(denied());
        };
        let Some(login) = dash.logins.get(&id) else {
            return Err(denied());
        };
        let service = Arc::clone(&dash.service);
        let hash = login.token_hash.clone();
        let token = blocking(move || Ok(service.store.find_token(&hash)?)).await?;
        match token {
            Some(token) => Ok(Viewer {
                token: {
                    crate::logging::note_project(&token.project);
                    token
                },
                csrf: login.csrf,
                token_hash: login.token_hash,
            }),
            None => {
                // Revoked or expired since the login.
                dash.logins.remove(&id);
                Err(denied())
            }
        }
    }
}

/// Whether the browser says the request comes from another site: its `Origin` is not this
/// server, or `Sec-Fetch-Site` says cross-site.
fn cross_site(headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let same = host.is_some_and(|host| {
            origin == format!("http://{host}") || origin == format!("https://{host}")
        });
        if !same {
            return true;
        }
    }
    headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| !matches!(site, "same-origin" | "none"))
}

/// Checks that a change comes from one of this login's pages: the form's CSRF token, and
/// this origin.
pub(crate) fn check_change(
    viewer: &Viewer,
    headers: &HeaderMap,
    csrf: &str,
) -> Result<(), PageError> {
    if !same_secret(csrf, &viewer.csrf) || cross_site(headers) {
        return Err(PageError::Forbidden(
            "this change did not come from a dashboard page of this login; reload the page and \
             try again"
                .into(),
        ));
    }
    Ok(())
}

/// A form that changes something: only its CSRF token.
#[derive(Debug, Deserialize)]
pub(crate) struct ChangeForm {
    /// The login's CSRF token.
    #[serde(default)]
    pub csrf: String,
}

/// Where to go after the login: a path on this server, never elsewhere.
fn local_path(next: Option<&str>) -> String {
    match next {
        // A path of this site only: no `//host`, no backslash, and no whitespace or control
        // character (browsers drop a tab or newline and would read `/\t/evil` as `//evil`).
        Some(p)
            if p.starts_with('/')
                && !p.starts_with("//")
                && !p.contains('\\')
                && !p.chars().any(|c| c.is_whitespace() || c.is_control()) =>
        {
            p.to_owned()
        }
        _ => "/".to_owned(),
    }
}

/// The query of `GET /login`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct LoginQuery {
    next: Option<String>,
}

fn form(next: &str, error: Option<&str>) -> Markup {
    html! {
        div.login {
            h1 { "Log in to cordon" }
            p { "Paste an API token (" code { "cordon token create" } "). A project token shows "
                "its project's jobs; an operator token (project " code { "*" } ", scope "
                code { "admin" } ") shows every project and the sessions." }
            @if let Some(error) = error {
                p.error role="alert" { (error) }
            }
            form method="post" action="/login" {
                input type="hidden" name="next" value=(next);
                label for="token" { "Token" }
                input #token type="password" name="token" required autocomplete="off"
                    spellcheck="false" autofocus;
                button type="submit" { "Log in" }
            }
        }
    }
}

/// `GET /login`: the form (or straight on when already logged in).
pub(crate) async fn login_form(
    State(dash): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Query(query): Query<LoginQuery>,
) -> Response {
    let next = local_path(query.next.as_deref());
    if cookie(&headers).is_some_and(|id| dash.logins.get(&id).is_some()) {
        return (StatusCode::SEE_OTHER, [(header::LOCATION, next)]).into_response();
    }
    layout::page("Log in", None, layout::Nav::None, form(&next, None)).into_response()
}

/// The login form's fields.
#[derive(Debug, Deserialize)]
pub(crate) struct LoginForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    next: Option<String>,
}

/// `POST /login`: checks the token, starts a login, sets its cookie.
pub(crate) async fn login(
    State(dash): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Form(fields): Form<LoginForm>,
) -> Result<Response, PageError> {
    let next = local_path(fields.next.as_deref());
    if cross_site(&headers) {
        return Err(PageError::Forbidden(
            "a login must come from this server's own login form".into(),
        ));
    }
    let refuse = |message: &str| {
        (
            StatusCode::UNAUTHORIZED,
            layout::page(
                "Log in",
                None,
                layout::Nav::None,
                form(&next, Some(message)),
            ),
        )
            .into_response()
    };
    let secret = fields.token.trim().to_owned();
    let service = Arc::clone(&dash.service);
    let header = format!("Bearer {secret}");
    let token = match blocking(move || service.authenticate(Some(&header))).await {
        Ok(token) => token,
        Err(crate::service::RequestError::Unauthorized) => {
            return Ok(refuse(
                "That token is not valid (unknown, revoked or expired).",
            ));
        }
        Err(crate::service::RequestError::TokenRefused(why)) => {
            return Ok(refuse(&format!("That token is not valid: {why}.")));
        }
        Err(error) => return Err(error.into()),
    };
    if require(&token, "read").is_err() {
        return Ok(refuse(
            "That token cannot read jobs: it needs the read (or admin) scope.",
        ));
    }
    let expires = token
        .expires_at_ms
        .map_or(now_ms() + LIFETIME_MS, |t| t.min(now_ms() + LIFETIME_MS));
    let Some((id, _)) = dash.logins.create(token_hash(&secret), expires) else {
        return Err(PageError::Internal);
    };
    let cookie = login_cookie(&id, (expires - now_ms()).max(0) / 1000, &headers);
    Ok((
        StatusCode::SEE_OTHER,
        [(header::SET_COOKIE, cookie), (header::LOCATION, next)],
    )
        .into_response())
}

/// The cookie of a login: `HttpOnly`, `SameSite=Strict`, and `Secure` when the browser reached
/// the server over TLS (a TLS proxy in front says so with `X-Forwarded-Proto: https`).
fn login_cookie(id: &str, max_age_s: i64, headers: &HeaderMap) -> String {
    let tls = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    format!(
        "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{}",
        if tls { "; Secure" } else { "" }
    )
}

/// `POST /logout`: ends the login.
pub(crate) async fn logout(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
    headers: HeaderMap,
    Form(fields): Form<ChangeForm>,
) -> Result<Response, PageError> {
    check_change(&viewer, &headers, &fields.csrf)?;
    if let Some(id) = cookie(&headers) {
        dash.logins.remove(&id);
    }
    let cleared = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    Ok((
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, cleared),
            (header::LOCATION, "/login".to_owned()),
        ],
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logins_expire_and_are_removed() {
        let logins = Logins::default();
        let (id, csrf) = logins.create("h".into(), now_ms() + 60_000).unwrap();
        assert_eq!(id.len(), 64);
        assert_ne!(id, csrf);
        assert_eq!(logins.get(&id).unwrap().token_hash, "h");
        logins.remove(&id);
        assert!(logins.get(&id).is_none());
        let (old, _) = logins.create("h".into(), now_ms() - 1).unwrap();
        assert!(logins.get(&old).is_none(), "an expired login is no login");
    }

    #[test]
    fn one_token_logging_in_again_and_again_evicts_only_its_own_logins() {
        let logins = Logins::default();
        let (other, _) = logins.create("other".into(), now_ms() + 1_000).unwrap();
        let mut mine = Vec::new();
        for i in 0..MAX_LOGINS_PER_TOKEN * 4 {
            let expires = now_ms() + 60_000 + i64::try_from(i).unwrap();
            mine.push(logins.create("mine".into(), expires).unwrap().0);
        }
        assert!(logins.get(&other).is_some(), "another token's login stays");
        let kept: Vec<_> = mine.iter().filter(|id| logins.get(id).is_some()).collect();
        assert_eq!(kept.len(), MAX_LOGINS_PER_TOKEN);
        assert!(
            logins.get(mine.last().unwrap()).is_some(),
            "the newest stays"
        );
        assert!(logins.get(&mine[0]).is_none(), "the oldest went");
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "a=1; cordon_dash=abc; b=2".parse().unwrap());
        assert_eq!(cookie(&headers).as_deref(), Some("abc"));
        headers.insert(header::COOKIE, "cordon_dashx=1".parse().unwrap());
        assert_eq!(cookie(&headers), None);
    }

    #[test]
    fn the_login_cookie_is_http_only_strict_and_secure_over_tls() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            login_cookie("abc", 60, &headers),
            "cordon_dash=abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=60"
        );
        headers.insert("x-forwarded-proto", "https".parse().unwrap());
        assert!(login_cookie("abc", 60, &headers).ends_with("; Secure"));
    }

    #[test]
    fn only_local_paths_are_followed_after_a_login() {
        assert_eq!(local_path(Some("/jobs/j-x?a=1")), "/jobs/j-x?a=1");
        for bad in [
            "//evil.example",
            "https://evil.example",
            "/\\evil",
            "jobs",
            "/\t/evil.example",
            "/\n/evil.example",
            "/ /evil.example",
        ] {
            assert_eq!(local_path(Some(bad)), "/", "{bad}");
        }
        assert_eq!(local_path(None), "/");
    }

    #[test]
    fn changes_from_other_sites_are_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "127.0.0.1:7878".parse().unwrap());
        assert!(
            !cross_site(&headers),
            "no Origin: a same-origin form of an older browser"
        );
        headers.insert(header::ORIGIN, "http://127.0.0.1:7878".parse().unwrap());
        assert!(!cross_site(&headers));
        headers.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(cross_site(&headers));
        headers.insert(header::ORIGIN, "http://127.0.0.1:7878".parse().unwrap());
        headers.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(cross_site(&headers));
        assert!(same_secret("abc", "abc") && !same_secret("abc", "abd") && !same_secret("a", ""));
    }
}
