//! TLS to the database, asked for in the URL with libpq's parameter names,
//! so the URL a hosting provider gives works as it is:
//!
//! - `sslmode`: without it, or `disable`, `allow`, `prefer`, the
//!   connection is not encrypted (tactful never encrypts without checking
//!   whom it talks to: that protects against nothing but a passive
//!   listener, and hides that nothing is checked). `require` and
//!   `verify-full` encrypt and verify the server's certificate and host
//!   name (stricter than libpq's `require`, which checks nothing unless a
//!   root certificate is at hand); `verify-ca` verifies the certificate
//!   but not the name, for a server reached by an address its certificate
//!   does not list.
//! - `sslrootcert`: a PEM file of the authorities to trust, instead of
//!   this machine's (`system`, or nothing, trusts the machine's).
//! - `sslcert` and `sslkey`: a client certificate and its key (PEM), for
//!   servers that authenticate by certificate.
//!
//! tokio-postgres reads none of these but `sslmode` (and not its `verify-`
//! values), so they are taken off the URL before it reads the rest; the
//! files are read when the URL is, so a wrong path is a config error, not
//! a failure at the first connection. TLS itself is rustls (already in the
//! build for the platforms) through `tokio-postgres-rustls`, which also
//! gives SCRAM its channel binding. The crypto provider is named here
//! (`ring`): the build has two, and rustls will not pick one by itself.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;

/// The URL parameters this module reads (and takes off the URL).
const KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// How far the server is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// No TLS.
    Off,
    /// Encrypted; the certificate is signed by a trusted authority.
    Authority,
    /// Encrypted; the certificate is trusted and names the host.
    Full,
}

/// What a store URL asks of TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// How far the server is checked.
    pub verify: Verify,
    /// `sslrootcert`: a PEM file of trusted authorities (`None`: this
    /// machine's).
    pub root_cert: Option<String>,
    /// `sslcert` and `sslkey`: a client certificate and its key.
    pub client: Option<(String, String)>,
}

/// `url` without the parameters this module reads, and what they ask.
/// Errors name the parameter and say what would be right.
pub fn split(url: &str) -> Result<(String, Settings), String> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, query),
        None => (url, ""),
    };
    let mut kept = Vec::new();
    let mut found: [Option<String>; 4] = Default::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match KEYS.iter().position(|k| *k == key) {
            Some(i) => found[i] = Some(decode(value)),
            None => kept.push(pair),
        }
    }
    let [mode, root_cert, cert, key] = found;
    let verify = match mode.as_deref() {
        None | Some("disable" | "allow" | "prefer") => Verify::Off,
        Some("require" | "verify-full") => Verify::Full,
        Some("verify-ca") => Verify::Authority,
        Some(other) => {
            return Err(format!(
                "sslmode={other} is not a mode: write disable, require, verify-ca or verify-full"
            ));
        }
    };
    let client = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        (Some(_), None) => return Err("sslcert is given without sslkey: give both, or neither".into()),
        (None, Some(_)) => return Err("sslkey is given without sslcert: give both, or neither".into()),
    };
    if verify == Verify::Off && (root_cert.is_some() || client.is_some()) {
        return Err(
            "sslrootcert, sslcert and sslkey need TLS: add sslmode=verify-full (or require, or verify-ca)"
                .into(),
        );
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let settings = Settings {
        verify,
        root_cert: root_cert.filter(|r| r != "system"),
        client,
    };
    Ok((rest, settings))
}

/// A URL query value, percent-decoded (a path may be written either way).
fn decode(value: &str) -> String {
    percent_encoding::percent_decode_str(value)
        .decode_utf8_lossy()
        .into_owned()
}

impl Settings {
    /// In a few words, for `check`: whether the connection is encrypted
    /// and what is verified.
    pub fn describe(&self) -> &'static str {
        match self.verify {
            Verify::Off => "not encrypted",
            Verify::Authority => "TLS, the certificate's authority verified (not the host name)",
            Verify::Full => "TLS, the certificate and host name verified",
        }
    }

    /// The mode tokio-postgres is told: TLS required, or none.
    pub fn ssl_mode(&self) -> SslMode {
        match self.verify {
            Verify::Off => SslMode::Disable,
            Verify::Authority | Verify::Full => SslMode::Require,
        }
    }

    /// The connector for these settings: the files read, the authorities
    /// loaded. Errors say which file and what is wrong with it.
    pub fn connector(&self) -> Result<tokio_postgres_rustls::MakeRustlsConnect, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS cannot be set up: {e}"))?;
        let builder = match self.verify {
            Verify::Off => builder.with_root_certificates(RootCertStore::empty()),
            Verify::Full => builder.with_root_certificates(self.roots()?),
            Verify::Authority => {
                let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(self.roots()?), provider)
                    .build()
                    .map_err(|e| format!("TLS cannot be set up: {e}"))?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AuthorityOnly(inner)))
            }
        };
        let config = match &self.client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_file_iter(cert)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("sslcert={cert} cannot be read as PEM certificates: {e}"))?;
                if chain.is_empty() {
                    return Err(format!("sslcert={cert} holds no certificate"));
                }
                // Never the key's content in an error: only its path.
                let key_der = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| format!("sslkey={key} cannot be read as a PEM private key: {e}"))?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| format!("sslcert={cert} and sslkey={key} do not go together: {e}"))?
            }
        };
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }

    /// The authorities to trust: `sslrootcert`'s, or this machine's.
    fn roots(&self) -> Result<RootCertStore, String> {
        let mut roots = RootCertStore::empty();
        match &self.root_cert {
            Some(path) => {
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("sslrootcert={path} cannot be read as PEM certificates: {e}"))?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(format!("sslrootcert={path} holds no usable certificate"));
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err(
                        "this machine has no trusted certificate authorities (install ca-certificates), so the database cannot be verified: give its authority with sslrootcert=/path/to/ca.pem".into(),
                    );
                }
            }
        }
        Ok(roots)
    }
}

/// `verify-ca`: the certificate must be signed by a trusted authority and
/// valid now; the name it is for is not compared with the host.
#[derive(Debug)]
struct AuthorityOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AuthorityOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
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
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Whether a connection error is the certificate's or the handshake's
/// (not worth trying again: it fails the same way until someone changes
/// the URL or the server).
pub fn is_tls_refusal(e: &tokio_postgres::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>()
            && io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// What a connection error says, with what to change where the cause is
/// TLS: the server's certificate refused, or a server that wants TLS
/// asked without it.
pub fn explain(e: &tokio_postgres::Error) -> String {
    let said = tactful_core::cause::root_cause(e);
    if is_tls_refusal(e) && said.contains("not valid for name") {
        format!(
            "TLS failed: {said} (connect by a name the certificate lists, or use sslmode=verify-ca, which checks the authority but not the name)"
        )
    } else if is_tls_refusal(e) {
        format!(
            "TLS failed: {said} (is the server's authority trusted? give it with sslrootcert=/path/to/ca.pem)"
        )
    } else if said.contains("no encryption") {
        format!("{said} (the server wants TLS: add sslmode=require to the URL)")
    } else {
        said.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_keeps_what_tokio_postgres_reads_and_gives_the_rest_here() {
        let (rest, s) = split(
            "postgres://u:p@db:5432/x?application_name=a&sslmode=verify-ca&sslrootcert=%2Fetc%2Fca.pem&connect_timeout=3",
        )
        .expect("read");
        assert_eq!(
            rest,
            "postgres://u:p@db:5432/x?application_name=a&connect_timeout=3"
        );
        assert_eq!(s.verify, Verify::Authority);
        assert_eq!(s.root_cert.as_deref(), Some("/etc/ca.pem"));
        assert_eq!(s.client, None);
        let (rest, s) = split("postgres://db/x?sslmode=require").expect("read");
        assert_eq!(rest, "postgres://db/x");
        assert_eq!(s.verify, Verify::Full);
        let (_, s) = split("postgres://db/x?sslmode=verify-full&sslrootcert=system").expect("read");
        assert_eq!(s.root_cert, None, "system means this machine's");
        let (_, s) = split("postgres://db/x").expect("read");
        assert_eq!(s.verify, Verify::Off);
        assert_eq!(s.ssl_mode(), SslMode::Disable);
    }

    #[test]
    fn a_wrong_setting_is_named() {
        let e = split("postgres://db/x?sslmode=verify_full").expect_err("refused");
        assert!(
            e.contains("sslmode=verify_full") && e.contains("verify-full"),
            "{e}"
        );
        let e = split("postgres://db/x?sslmode=require&sslcert=/c.pem").expect_err("refused");
        assert!(e.contains("without sslkey"), "{e}");
        let e = split("postgres://db/x?sslrootcert=/ca.pem").expect_err("refused");
        assert!(e.contains("sslmode=verify-full"), "{e}");
    }

    #[test]
    fn a_missing_file_is_named_when_the_connector_is_made() {
        let (_, s) = split("postgres://db/x?sslmode=require&sslrootcert=/nonexistent/ca.pem").expect("read");
        let e = s.connector().err().expect("no such file");
        assert!(e.contains("sslrootcert=/nonexistent/ca.pem"), "{e}");
    }
}
