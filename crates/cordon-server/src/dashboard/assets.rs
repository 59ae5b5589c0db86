//! The dashboard's stylesheet, script and icon, compiled into the binary (no build step, no
//! CDN: the dashboard works offline). URLs carry a hash of the content, so a browser may keep
//! them for a day and still never runs an old script against a new page.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "dashboard.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/dashboard.css"),
    },
    Asset {
        name: "dashboard.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/dashboard.js"),
    },
    Asset {
        name: "icon.svg",
        content_type: "image/svg+xml",
        body: include_str!("assets/icon.svg"),
    },
];

/// The first 12 hex digits of the SHA-256 of every asset, in the order of [`ASSETS`].
static VERSIONS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            Sha256::digest(a.body.as_bytes())
                .iter()
                .take(6)
                .map(|b| format!("{b:02x}"))
                .collect()
        })
        .collect()
});

/// The URL of an asset, with its version.
pub(crate) fn url(name: &str) -> String {
    match ASSETS.iter().position(|a| a.name == name) {
        Some(i) => format!("/assets/{name}?v={}", VERSIONS[i]),
        None => format!("/assets/{name}"),
    }
}

/// `GET /assets/{file}`.
pub(crate) async fn serve(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == file) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let asset = &ASSETS[i];
    let etag = format!("\"{}\"", VERSIONS[i]);
    let cache = "public, max-age=86400";
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag))
    {
        return (
            StatusCode::NOT_MODIFIED,
            [(header::ETAG, etag), (header::CACHE_CONTROL, cache.into())],
        )
            .into_response();
    }
    let mut response = (
        [
            (header::CONTENT_TYPE, asset.content_type.to_owned()),
            (header::ETAG, etag),
        ],
        asset.body,
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    response
}
