//! Who may ask: the `Host:` rule against DNS rebinding, and the bearer/query token check.

use super::*;

/// Which `Host` headers may reach the protected routes.
#[derive(Debug)]
pub(super) struct HostRule {
    /// No token and no allow-list: loopback names only. With an allow-list: those too.
    /// With a token and no allow-list: any host (the token is the guard).
    pub(super) enforce: bool,
    pub(super) bound: IpAddr,
    pub(super) allowed: Vec<String>,
}

impl HostRule {
    pub(super) fn new(cfg: &HttpConfig, bound: IpAddr) -> Self {
        let has_token = cfg.token.is_some() || cfg.token_file.is_some();
        Self {
            enforce: !has_token || !cfg.allowed_hosts.is_empty(),
            bound,
            allowed: cfg
                .allowed_hosts
                .iter()
                .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
                .collect(),
        }
    }

    /// Whether a request with this `Host` header may be served. A request without one
    /// never gets here (`one_host` answers 400).
    pub(super) fn allows(&self, host: Option<&str>) -> bool {
        if !self.enforce {
            return true;
        }
        let Some(host) = host else { return true };
        let name = host_name(host).trim_end_matches('.').to_ascii_lowercase();
        if self.allowed.contains(&name) {
            return true;
        }
        // Browsers resolve `localhost` and `*.localhost` to loopback themselves (RFC 6761).
        if name == "localhost" || name.ends_with(".localhost") {
            return true;
        }
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback() || ip == self.bound,
            Err(_) => false,
        }
    }
}

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

/// The host part of a `Host` header value: `name`, `name:port`, `[v6]` or `[v6]:port`.
pub(super) fn host_name(value: &str) -> &str {
    let v = value.trim();
    if v.starts_with('[') {
        return v.split_once(']').map_or(v, |(h, _)| &v[..h.len() + 1]);
    }
    match v.rsplit_once(':') {
        Some((h, port)) if !h.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => v,
    }
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
