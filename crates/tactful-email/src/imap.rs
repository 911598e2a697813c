//! One IMAP connection: TCP, TLS as configured (from the start, after
//! STARTTLS, or none to a loopback server), the greeting, the login.

use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_util::either::Either;

use crate::{EmailPersona, Endpoint, Tls};

/// The stream under an IMAP session: plain (loopback only) or TLS.
pub(crate) type Stream = Either<TcpStream, tokio_rustls::client::TlsStream<TcpStream>>;

/// A logged-in IMAP session.
pub(crate) type Session = async_imap::Session<Stream>;

/// How long connecting, the greeting and the login may take together.
const LOGIN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The TLS settings: the system's roots, aws-lc (the provider the rest of
/// the build uses).
fn tls_config() -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .unwrap_or_else(|_| {
            rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        });
    Arc::new(config)
}

async fn tls(host: &str, tcp: TcpStream) -> Result<Stream, String> {
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|e| format!("{host} is not a name TLS can check: {e}"))?;
    let tls = tokio_rustls::TlsConnector::from(tls_config())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS with {host}: {e}"))?;
    Ok(Either::Right(tls))
}

/// Connects and logs `persona` in.
pub(crate) async fn login(server: &Endpoint, persona: &EmailPersona) -> Result<Session, String> {
    tokio::time::timeout(LOGIN_WAIT, login_now(server, persona))
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "IMAP {server}: no answer within {} s",
                LOGIN_WAIT.as_secs()
            ))
        })
}

async fn login_now(server: &Endpoint, persona: &EmailPersona) -> Result<Session, String> {
    let tcp = TcpStream::connect((server.host.as_str(), server.port))
        .await
        .map_err(|e| format!("IMAP {server}: {e}"))?;
    let stream = match server.tls {
        Tls::Required => tls(&server.host, tcp).await?,
        Tls::None => Either::Left(tcp),
        Tls::StartTls => {
            let mut plain = async_imap::Client::new(tcp);
            greeting(&mut plain, server).await?;
            plain
                .run_command_and_check_ok("STARTTLS", None)
                .await
                .map_err(|e| format!("IMAP {server} refused STARTTLS: {e}"))?;
            let tls = tls(&server.host, plain.into_inner()).await?;
            let client = async_imap::Client::new(tls);
            return client
                .login(&persona.username, &persona.password)
                .await
                .map_err(|(e, _)| refused(server, persona, &e));
        }
    };
    let mut client = async_imap::Client::new(stream);
    greeting(&mut client, server).await?;
    client
        .login(&persona.username, &persona.password)
        .await
        .map_err(|(e, _)| refused(server, persona, &e))
}

async fn greeting<T>(client: &mut async_imap::Client<T>, server: &Endpoint) -> Result<(), String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + std::fmt::Debug + Send,
{
    match client.read_response().await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(format!("IMAP {server} closed the connection before greeting")),
        Err(e) => Err(format!("IMAP {server}: {e}")),
    }
}

fn refused(server: &Endpoint, persona: &EmailPersona, e: &async_imap::error::Error) -> String {
    format!("IMAP {server} refused the login of {}: {e}", persona.username)
}
