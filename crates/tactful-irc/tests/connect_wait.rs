//! A reply decided before its persona's IRC connection is up (tactful just
//! started, the connection dropped, or this process has just taken IRC
//! over from one that died, with the dead one's turns to carry on) waits
//! for the connection and goes out on it, instead of being dropped as
//! "not connected"; and it is addressed to the author of the line it
//! answers, which this process never heard (the nick is in the line's id).

use std::time::Duration;

use tactful_core::{MsgId, PersonaId, RoomId};
use tactful_irc::{IrcPersona, IrcPlatform, IrcSettings};
use tactful_runtime::{OutMessage, Platform};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

#[tokio::test]
async fn a_reply_sent_before_the_connection_is_up_goes_out_once_it_is() {
    let server = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = server.local_addr().expect("address").port();
    let platform = IrcPlatform::new(IrcSettings {
        server: "127.0.0.1".into(),
        port,
        tls: false,
        channels: Vec::new(),
        send_interval: Duration::from_millis(1),
        personas: vec![IrcPersona {
            id: PersonaId::new("docs"),
            nick: "docs".into(),
            password: None,
        }],
        max_backoff: Duration::from_secs(1),
        nick_retry: Duration::from_secs(60),
    });

    // Nothing is connected yet: the send waits.
    let sending = {
        let platform = platform.clone();
        tokio::spawn(async move {
            let (persona, room) = (PersonaId::new("docs"), RoomId::new("irc:#team"));
            // A line alice said, heard by another process (or before a
            // restart).
            let answering = MsgId::new("i1764000000000-7.alice");
            platform
                .send(OutMessage {
                    persona: &persona,
                    room: &room,
                    thread: None,
                    text: "carried on",
                    reply_to: Some(&answering),
                    key: None,
                    placeholder: false,
                    follows: None,
                    first_replied_to: None,
                })
                .await
        })
    };
    tokio::task::yield_now().await;
    assert!(!sending.is_finished(), "waiting for the connection");

    // The connection is made (a server that welcomes the nick): the reply
    // is the first thing said on it.
    let _tasks = platform.start();
    let (stream, _) = tokio::time::timeout(Duration::from_secs(10), server.accept())
        .await
        .expect("connects in time")
        .expect("accepts");
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let said = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(line) = lines.next_line().await.expect("reads") {
            if line.starts_with("USER ") {
                write
                    .write_all(b":fake.test 001 docs :Welcome\r\n")
                    .await
                    .expect("welcomes");
            }
            if line.starts_with("PRIVMSG ") {
                return line;
            }
        }
        panic!("the connection closed before the reply");
    })
    .await
    .expect("the reply in time");
    assert_eq!(said, "PRIVMSG #team :alice: carried on");
    let sent = tokio::time::timeout(Duration::from_secs(10), sending)
        .await
        .expect("the send returns")
        .expect("joins");
    assert!(sent.is_ok(), "{sent:?}");
}
