//! Who may ask: the `Host:` rule against DNS rebinding, and the bearer/query token check.

use std::sync::atomic::Ordering;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::app_state::AppState;

/// Every request must carry exactly one `Host` header (RFC 9112, section 3.2: a server
/// answers 400 to a request without one, or with more than one). Both were served;
/// with two, which one the host rule checked was up to the header map's order. Applies
/// to every route, `/healthz` included; counted (`reason="bad_request"`).
pub(super) async fn one_host(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let hosts = req.headers().get_all(header::HOST).iter().count();
    if hosts == 1 {
        return next.run(req).await;
    }
    st.hub.refused_bad_request.fetch_add(1, Ordering::Relaxed);
    log::debug!("http: refused a request with {hosts} Host headers");
    (
        StatusCode::BAD_REQUEST,
        "a request needs exactly one Host header\n",
    )
        .into_response()
}

/// Constant-time comparison so the token cannot be guessed byte by byte from timing.
pub(super) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is
/// case-insensitive (RFC 9110, section 11.1): `bearer` and `BEARER` are as good as
/// `Bearer`; one or more spaces separate it from the token.
pub(super) fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim().split_once(' ')?;
    let token = rest.trim_start();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

pub(super) fn query_token(req: &Request) -> Option<String> {
    form_urlencoded::parse(req.uri().query()?.as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
}

pub(super) async fn auth(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if !st.hosts.allows(host) {
        st.hub.refused_host.fetch_add(1, Ordering::Relaxed);
        log::debug!("http: refused Host {host:?}");
        return (
            StatusCode::FORBIDDEN,
            "Host not allowed: use http://127.0.0.1 or localhost, add the name to http.allowed_hosts, or set http.token\n",
        )
            .into_response();
    }
    let Some(token) = st.token.as_deref() else {
        return next.run(req).await;
    };
    let from_header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
        .map(|t| same_secret(t.as_bytes(), token.as_bytes()))
        .unwrap_or(false);
    let ok = from_header
        || query_token(&req).is_some_and(|t| same_secret(t.as_bytes(), token.as_bytes()));
    if ok {
        next.run(req).await
    } else {
        let mut r = (StatusCode::UNAUTHORIZED, "bearer token required\n").into_response();
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        r
    }
}
