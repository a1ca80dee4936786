//! TLS for the broker connection (rustls with ring).

use super::*;

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
    let cas = CertificateDer::pem_file_iter(&tls.ca_file)
        .map_err(|e| ca_err(e.into()))?
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
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| cert_err(e.into()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| cert_err(e.into()))?;
            if chain.is_empty() {
                return Err(cert_err("no certificate found".into()));
            }
            let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| MqttError::ClientKey {
                path: key.clone(),
                source: e.into(),
            })?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(MqttError::Tls)
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}
