//! The `Host:` rule against DNS rebinding: which `Host` headers may reach the protected
//! routes.

use std::net::IpAddr;

use super::config::HttpConfig;

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
