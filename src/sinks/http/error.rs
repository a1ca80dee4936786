//! The HTTP listener's error type.

use std::net::SocketAddr;
use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum HttpError {
    #[error("http.bind {addr}: cannot listen: {source} (another sarcasmd or service on that port? choose another port in http.bind)")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("http.token_file {path}: {reason}")]
    TokenFile { path: PathBuf, reason: String },
    #[error("cannot start the HTTP runtime: {0}")]
    Runtime(std::io::Error),
}
