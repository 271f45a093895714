//! TLS for runtimed's clients of services outside the cluster's API (a Git server, an S3
//! store): rustls on ring, trusting Mozilla's roots, the system's (which honour
//! `SSL_CERT_FILE`) and, when given, a private CA's PEM file. Builds configuration only.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

/// The client configuration, or why `ca_file` cannot be trusted.
pub fn client_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for cert in rustls_native_certs::load_native_certs().certs {
        // A system certificate rustls cannot parse is skipped, as the system's tools do.
        let _ = roots.add(cert);
    }
    if let Some(file) = ca_file {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
            .map_err(|e| e.to_string())?
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        if certs.is_empty() {
            return Err("holds no PEM certificate".into());
        }
        for cert in certs {
            roots.add(cert).map_err(|e| e.to_string())?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth())
}
