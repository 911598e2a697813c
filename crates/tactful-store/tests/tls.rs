//! The store over TLS, against a real PostgreSQL that refuses connections
//! without it (`testing::tls::TlsServer`): a hosted database's URL works as
//! its provider writes it, and whatever cannot be verified is refused with
//! the setting to change, never with a secret, and never retried as if
//! the server were only busy.

use std::time::Duration;

use tactful_core::{Message, MsgId, RoomId, Timestamp};
use tactful_store::testing::tls::TlsServer;
use tactful_store::{Location, Op, Reader, Store, StoreError, WEB_CHANNEL};

fn location(url: &str) -> Location {
    Location::postgres(url).unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn param(path: &std::path::Path) -> String {
    path.display().to_string()
}

/// What opening the store at `url` says when it fails.
fn refused(url: &str) -> StoreError {
    match Store::open_at(&location(url)) {
        Ok(_) => panic!("{url} was let in"),
        Err(e) => e,
    }
}

#[test]
fn a_verified_server_is_used_and_anything_unverified_is_refused_with_what_to_change() {
    let Some((server, files)) = TlsServer::start() else {
        return;
    };
    let ca = param(&files.ca);

    // Verified: the authority given, the address its certificate names.
    let url = server.url(
        "postgres:s3cret-pw",
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let mut store = Store::open_at(&location(&url)).expect("opens over TLS");
    let heard = Message::new("m1", "lobby", "alice", "over TLS", Timestamp::from_millis(1_000));
    store.apply(&[Op::Heard(heard)]).expect("writes");
    let reader = Reader::open(&location(&url)).expect("reads over TLS");
    let back = reader.recent_messages("lobby", 5).expect("reads");
    assert_eq!(back.len(), 1);
    assert_eq!(&*back[0].text, "over TLS");
    assert_eq!(back[0].room, RoomId::new("lobby"));
    // `require` verifies as much as `verify-full`.
    Store::open_at(&location(&server.url(
        "postgres",
        "127.0.0.1",
        &format!("sslmode=require&sslrootcert={ca}"),
    )))
    .expect("require, verified");

    // Without TLS, the server refuses; the error says to ask for it.
    let e = refused(&server.url("postgres:s3cret-pw", "127.0.0.1", "sslmode=disable")).to_string();
    assert!(e.contains("add sslmode=require"), "{e}");
    let e = refused(&server.url("postgres", "127.0.0.1", "")).to_string();
    assert!(e.contains("add sslmode=require"), "no sslmode is no TLS: {e}");

    // An authority that did not sign the server's certificate; and this
    // machine's authorities, which did not either.
    for params in [
        format!("sslmode=verify-full&sslrootcert={}", param(&files.stranger_ca)),
        "sslmode=require".to_owned(),
    ] {
        let e = refused(&server.url("postgres:s3cret-pw", "127.0.0.1", &params));
        assert!(!e.is_transient(), "a refused certificate is not tried again: {e}");
        let e = e.to_string();
        assert!(
            e.contains("TLS failed") && e.contains("sslrootcert="),
            "{params}: {e}"
        );
        assert!(!e.contains("s3cret-pw"), "the password stays out of errors: {e}");
    }

    // A host name the certificate does not list: refused by verify-full,
    // let in by verify-ca (the authority is checked, not the name).
    let e = refused(&server.url(
        "postgres",
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ));
    let e = e.to_string();
    assert!(
        e.contains("not valid for name") && e.contains("sslmode=verify-ca"),
        "{e}"
    );
    Store::open_at(&location(&server.url(
        "postgres",
        "localhost",
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    )))
    .expect("verify-ca does not compare the name");
}

#[test]
fn a_client_certificate_lets_in_the_user_it_names_and_listening_works_over_tls() {
    let Some((server, files)) = TlsServer::start() else {
        return;
    };
    let (ca, cert, key) = (param(&files.ca), param(&files.cert), param(&files.key));
    let verified = format!("sslmode=verify-full&sslrootcert={ca}");

    // `certuser` gets in with its certificate only.
    let e = refused(&server.url("certuser", "127.0.0.1", &verified)).to_string();
    assert!(e.contains("certificate"), "{e}");
    let url = server.url(
        "certuser",
        "127.0.0.1",
        &format!("{verified}&sslcert={cert}&sslkey={key}"),
    );
    Store::open_at(&location(&url)).expect("the certificate lets certuser in");

    // A key file that is not a key: the config's error, naming the file.
    let e = Location::postgres(&server.url(
        "certuser",
        "127.0.0.1",
        &format!("{verified}&sslcert={cert}&sslkey={ca}"),
    ))
    .expect_err("a certificate is not a key")
    .to_string();
    assert!(e.contains(&format!("sslkey={ca}")), "{e}");

    // The other processes' announcements come over TLS too: listening
    // has begun when `listen` returns, so one is enough.
    let mut heard = tactful_store::listen(&location(&url), WEB_CHANNEL).expect("listens");
    let mut store =
        Store::open_at(&location(&server.url("postgres", "127.0.0.1", &verified))).expect("opens");
    store
        .apply(&[Op::ShownNote {
            room: RoomId::new("lobby"),
            id: MsgId::new("w1"),
            note: "stays quiet: over TLS".into(),
        }])
        .expect("writes");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let got = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(30), heard.recv()).await })
        .expect("announced within 30 s")
        .expect("the listener is there");
    assert!(got.payload.contains("over TLS"), "{}", got.payload);
}
