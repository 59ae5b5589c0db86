//! What a dashboard request can end in besides its page: a way to the login form, or an
//! error page with the status the API would answer.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::html;

use super::layout;
use crate::service::RequestError;

/// Why a dashboard request did not get its page.
#[derive(Debug)]
pub(crate) enum PageError {
    /// Not logged in (or the token behind the login was revoked or expired): a page goes to
    /// the login form, which comes back to `next` afterwards.
    Login {
        /// Where to come back to (a path on this server).
        next: String,
    },
    /// Not logged in, for what scripts fetch (fragments, the live log): 401.
    Unauthorized,
    /// The token may not do this (a scope), or the request looks forged (CSRF): 403.
    Forbidden(String),
    /// Nothing this token may see has this name: 404.
    NotFound,
    /// The request is malformed: 400.
    BadRequest(String),
    /// The store failed: 500 (the details go to the server's log).
    Internal,
}

impl From<RequestError> for PageError {
    fn from(error: RequestError) -> Self {
        match error {
            RequestError::Unauthorized | RequestError::TokenRefused(_) => PageError::Unauthorized,
            RequestError::Scope(_) | RequestError::Policy { .. } | RequestError::Budget { .. } => {
                PageError::Forbidden(error.to_string())
            }
            RequestError::NotFound => PageError::NotFound,
            RequestError::BadRequest(message)
            | RequestError::Conflict { message, .. }
            | RequestError::Busy(message) => PageError::BadRequest(message),
            RequestError::Store(error) => {
                eprintln!("cordon serve: dashboard: {error}");
                PageError::Internal
            }
            RequestError::Internal => PageError::Internal,
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, title, message) = match self {
            PageError::Login { next } => {
                let query =
                    serde_urlencoded::to_string([("next", next.as_str())]).unwrap_or_default();
                return (
                    StatusCode::SEE_OTHER,
                    [(header::LOCATION, format!("/login?{query}"))],
                )
                    .into_response();
            }
            PageError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "Log in",
                "Log in again: the login has ended.".to_owned(),
            ),
            PageError::Forbidden(why) => (StatusCode::FORBIDDEN, "Not allowed", why),
            PageError::NotFound => (
                StatusCode::NOT_FOUND,
                "Not found",
                "Nothing with this name is visible to this token.".to_owned(),
            ),
            PageError::BadRequest(why) => (StatusCode::BAD_REQUEST, "Bad request", why),
            PageError::Internal => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Server error",
                "The server could not read its store; its log says why.".to_owned(),
            ),
        };
        let body = html! {
            h1 { (title) }
            p.message { (message) }
            p { a href="/" { "Back to the jobs" } }
        };
        (status, layout::page(title, None, layout::Nav::None, body)).into_response()
    }
}
