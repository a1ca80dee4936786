//! The MQTT sink's error type.

use std::path::PathBuf;

use thiserror::Error;

use crate::common::error::BoxError;
use crate::common::validate::FieldError;

#[derive(Debug, Error)]
pub enum MqttError {
    #[error("invalid MQTT configuration: `{}`: {}", .0.field, .0.reason)]
    Config(FieldError),
    #[error(
        "mqtt.password_file: cannot read {path}: {source} (check the path and that the daemon \
         user may read it, e.g. via systemd LoadCredential=)"
    )]
    PasswordFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("mqtt.password_file: {path} is empty; put the broker password in it")]
    EmptyPasswordFile { path: PathBuf },
    #[error(
        "mqtt.tls.ca_file: cannot load CA certificates from {path}: {source} (it must be a \
         readable PEM file with at least one CERTIFICATE block)"
    )]
    CaFile {
        path: PathBuf,
        #[source]
        source: BoxError,
    },
    #[error(
        "mqtt.tls.client_cert: cannot load the client certificate from {path}: {source} (it must \
         be a readable PEM file with the CERTIFICATE chain)"
    )]
    ClientCert {
        path: PathBuf,
        #[source]
        source: BoxError,
    },
    #[error(
        "mqtt.tls.client_key: cannot load the private key from {path}: {source} (it must be a \
         readable PEM file with one PKCS#8, PKCS#1 or SEC1 private key)"
    )]
    ClientKey {
        path: PathBuf,
        #[source]
        source: BoxError,
    },
    #[error(
        "mqtt.tls: TLS setup failed: {0} (check that client_cert and client_key belong together)"
    )]
    Tls(#[source] rustls::Error),
    #[error("cannot start the MQTT client thread: {0}")]
    Thread(std::io::Error),
}
