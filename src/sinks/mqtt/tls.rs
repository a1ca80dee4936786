//! TLS for the broker connection (rustls with ring).

use std::path::Path;
use std::sync::Arc;

use super::config::MqttTlsConfig;
use super::error::MqttError;
use crate::common::error::BoxError;

/// A PEM file of certificates or a key is a few KB; a CA bundle of every public CA is
/// about 200 KB.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// A PEM file read by kind and with a bound (`/dev/zero` as `ca_file` was read until
/// memory ran out, a FIFO blocked): the parsers then read from memory.
fn read_pem(path: &Path) -> Result<Vec<u8>, BoxError> {
    crate::common::file_kind::read_bytes(path, MAX_PEM_BYTES).map_err(Into::into)
}

/// rustls client config with the ring provider passed explicitly (no aws-lc, no reliance on
/// a process default), trusting only the configured CA.
pub fn rustls_config(tls: &MqttTlsConfig) -> Result<rustls::ClientConfig, MqttError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    // Harmless if already installed; anything else in the process that asks rustls for
    // the default provider then gets ring too.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let ca_err = |reason: BoxError| MqttError::CaFile {
        path: tls.ca_file.clone(),
        source: reason,
    };
    let mut roots = rustls::RootCertStore::empty();
    let ca_pem = read_pem(&tls.ca_file).map_err(ca_err)?;
    let cas = CertificateDer::pem_slice_iter(&ca_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ca_err(e.into()))?;
    if cas.is_empty() {
        return Err(ca_err("no certificate found".into()));
    }
    for ca in cas {
        roots.add(ca).map_err(|e| ca_err(e.into()))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(MqttError::Tls)?
    .with_root_certificates(roots);

    match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => {
            let cert_err = |reason: BoxError| MqttError::ClientCert {
                path: cert.clone(),
                source: reason,
            };
            let cert_pem = read_pem(cert).map_err(cert_err)?;
            let chain = CertificateDer::pem_slice_iter(&cert_pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| cert_err(e.into()))?;
            if chain.is_empty() {
                return Err(cert_err("no certificate found".into()));
            }
            let key_err = |source: BoxError| MqttError::ClientKey {
                path: key.clone(),
                source,
            };
            let key_pem = read_pem(key).map_err(key_err)?;
            let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| key_err(e.into()))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(MqttError::Tls)
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}
