//! https for the audit: rustls, with the roots a user trusts.
//!
//! Without `--cacert` a server certificate must chain to one of the
//! webpki roots (Mozilla's list, compiled in) or the system's store; with
//! `--cacert FILE` only to the PEM certificates in FILE, so an audit of a
//! private deployment trusts its own CA and nothing else. TLS 1.2 and 1.3
//! through the `ring` provider; no client certificate.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

use super::AuditError;

/// Largest `--cacert` file read: 1 MiB of PEM is thousands of certificates.
const MAX_CACERT_BYTES: u64 = 1 << 20;

/// The TLS configuration of the audit's client.
pub fn client_config(cacert: Option<&Path>) -> Result<rustls::ClientConfig, AuditError> {
    let roots = match cacert {
        Some(file) => private_roots(file)?,
        None => public_roots(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| AuditError(format!("cannot set up TLS: {e}")))
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
}

/// The webpki roots and whatever the system's store holds.
fn public_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    // A system store that cannot be read leaves the webpki roots.
    let native = rustls_native_certs::load_native_certs();
    let (added, ignored) = roots.add_parsable_certificates(native.certs);
    tracing::debug!(added, ignored, "system roots");
    roots
}

/// Only the certificates of `file`.
fn private_roots(file: &Path) -> Result<RootCertStore, AuditError> {
    let name = file.display();
    let meta = std::fs::metadata(file).map_err(|e| AuditError(format!("--cacert {name}: {e}")))?;
    if !meta.is_file() || meta.len() > MAX_CACERT_BYTES {
        return Err(AuditError(format!(
            "--cacert {name}: not a PEM file of at most {MAX_CACERT_BYTES} bytes"
        )));
    }
    let pem = std::fs::read(file).map_err(|e| AuditError(format!("--cacert {name}: {e}")))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| AuditError(format!("--cacert {name}: not PEM certificates ({e})")))?;
    if certs.is_empty() {
        return Err(AuditError(format!(
            "--cacert {name} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )));
    }
    let mut roots = RootCertStore::empty();
    for (i, c) in certs.into_iter().enumerate() {
        roots.add(c).map_err(|e| {
            AuditError(format!(
                "--cacert {name}: certificate {} is not usable as a CA: {e}",
                i + 1
            ))
        })?;
    }
    Ok(roots)
}

/// The TLS failure inside `e`'s source chain, if the error is one. An
/// `io::Error` hides what it wraps from `source()` (hyper-rustls wraps
/// tokio-rustls's, which wraps rustls's), so each is opened in turn.
pub fn tls_failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = at {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Some(t.to_string());
        }
        at = match err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cacert_file_without_certificates_is_one_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("ca.pem");
        std::fs::write(&f, "not a certificate\n").unwrap();
        let e = client_config(Some(&f)).unwrap_err();
        assert!(e.0.contains("holds no PEM certificate"), "{e}");
        let e = client_config(Some(&dir.path().join("missing.pem"))).unwrap_err();
        assert!(e.0.starts_with("--cacert"), "{e}");
        assert!(client_config(None).is_ok());
    }
}
