//! The server's certificate, checked as `sslmode` asks (the `tls` feature).

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use toolcall_ledger::store::StoreError;

use crate::TlsMode;

/// The rustls configuration of `mode`, trusting `root` (a PEM file, or
/// `system`; the system's roots when `None`).
pub(crate) fn rustls_config(
    mode: TlsMode,
    root: Option<&str>,
) -> Result<rustls::ClientConfig, StoreError> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(StoreError::new)?;
    let checks = match (mode, root) {
        (TlsMode::Disable | TlsMode::Prefer, _) | (TlsMode::Require, None) => Checks::None,
        (TlsMode::Require | TlsMode::VerifyCa, _) => Checks::Chain,
        (TlsMode::VerifyFull, _) => Checks::ChainAndName,
    };
    let verifier: Arc<dyn ServerCertVerifier> = match checks {
        Checks::ChainAndName => webpki(root, &provider)?,
        Checks::Chain => Arc::new(Lenient {
            chain: Some(webpki(root, &provider)?),
            provider,
        }),
        Checks::None => Arc::new(Lenient {
            chain: None,
            provider,
        }),
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// The process's rustls provider when the application installed one
/// (aws-lc-rs, say, for post-quantum key exchange); ring otherwise.
fn provider() -> Arc<CryptoProvider> {
    if let Some(installed) = CryptoProvider::get_default() {
        return Arc::clone(installed);
    }
    // rustls 0.23.48 deprecates ring's provider for its lack of post-quantum
    // key exchange, and offers no other way to make it: ring stays the
    // fallback because aws-lc-rs would put a C build in every application's
    // dependencies.
    #[allow(deprecated)]
    Arc::new(rustls::crypto::ring::default_provider())
}

#[derive(Clone, Copy)]
enum Checks {
    None,
    Chain,
    ChainAndName,
}

/// The verifier of the chain to `root`'s certificates, and of the name.
fn webpki(
    root: Option<&str>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, StoreError> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots(root)?), Arc::clone(provider))
        .build()
        .map_err(|error| StoreError::new(format!("the trusted roots: {error}")))
}

/// The trusted roots: `root`'s PEM file, or the system's.
fn roots(root: Option<&str>) -> Result<RootCertStore, StoreError> {
    let mut store = RootCertStore::empty();
    match root {
        None | Some("system") => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A certificate of the system's that rustls cannot read is
                // left out, as libpq's OpenSSL would.
                let _ = store.add(cert);
            }
            if store.is_empty() {
                return Err(StoreError::new(
                    "no trusted roots: the system has none readable; name a file with sslrootcert",
                ));
            }
        }
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|error| StoreError::new(format!("sslrootcert={path}: {error}")))?;
            for cert in certs {
                let cert =
                    cert.map_err(|error| StoreError::new(format!("sslrootcert={path}: {error}")))?;
                store
                    .add(cert)
                    .map_err(|error| StoreError::new(format!("sslrootcert={path}: {error}")))?;
            }
            if store.is_empty() {
                return Err(StoreError::new(format!(
                    "sslrootcert={path} holds no certificate"
                )));
            }
        }
    }
    Ok(store)
}

/// A check short of `verify-full`: with a chain, `verify-ca` (the chain to a
/// trusted root, whatever host the certificate names); without, `prefer`
/// and `require` with no root (encrypted, the certificate not checked, as
/// libpq does). The handshake's signatures are checked either way.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_file_that_is_missing_or_empty_fails_closed() {
        let error = rustls_config(TlsMode::VerifyFull, Some("/nonexistent/ca.pem"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("/nonexistent/ca.pem"), "{error}");
        let empty = std::env::temp_dir().join(format!("toolcall-empty-{}.pem", std::process::id()));
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let error = rustls_config(TlsMode::VerifyCa, empty.to_str())
            .unwrap_err()
            .to_string();
        assert!(error.contains("no certificate"), "{error}");
        let _ = std::fs::remove_file(empty);
    }

    #[test]
    fn a_root_file_with_a_certificate_is_trusted_in_every_checking_mode() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).unwrap();
        let file = std::env::temp_dir().join(format!("toolcall-ca-{}.pem", std::process::id()));
        std::fs::write(&file, ca.pem()).unwrap();
        let trusted = roots(file.to_str()).unwrap();
        assert_eq!(trusted.len(), 1);
        for mode in [TlsMode::Require, TlsMode::VerifyCa, TlsMode::VerifyFull] {
            assert!(rustls_config(mode, file.to_str()).is_ok(), "{mode}");
        }
        let _ = std::fs::remove_file(file);
    }
}
