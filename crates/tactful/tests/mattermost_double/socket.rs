//! The double's event stream: authentication, `hello`, numbered events,
//! resumes from the last 128 events of a connection.

use super::*;

use axum::extract::ws::{Message as Ws, WebSocket};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;

type Shared = Arc<double::State<Inner>>;

pub(super) async fn upgrade(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    ws: axum::extract::WebSocketUpgrade,
) -> Response {
    let header_token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' ').map(|(_, t)| t.trim().to_owned()));
    ws.on_upgrade(move |socket| serve(shared, socket, header_token, q))
}

/// The user: by the upgrade's `Authorization` header, else by waiting for
/// `authentication_challenge` (a wrong token closes the socket, as the
/// server does). Whether the header did it: only such a socket may resume
/// a connection, as on the server.
async fn authenticate(
    shared: &Shared,
    socket: &mut WebSocket,
    header_token: Option<String>,
) -> Option<(User, bool)> {
    if let Some(t) = header_token {
        let user = shared.inner.lock().expect("double").user_by_token(&t);
        if user.is_some() {
            return user.map(|u| (u, true));
        }
    }
    while let Some(Ok(msg)) = socket.recv().await {
        let Ws::Text(text) = msg else { continue };
        let v: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
        let seq = v["seq"].as_u64().unwrap_or(0);
        if v["action"] != "authentication_challenge" {
            let fail = json!({"status": "FAIL", "seq_reply": seq, "error": {"id": "api.web_socket_router.not_authenticated.app_error", "message": "Not authenticated"}});
            let _ = socket.send(Ws::Text(fail.to_string().into())).await;
            continue;
        }
        // A wrong token closes the socket, as the server does.
        let token = v["data"]["token"].as_str().unwrap_or_default();
        let user = shared.inner.lock().expect("double").user_by_token(token)?;
        let answer = json!({"status": "OK", "seq_reply": seq});
        let _ = socket.send(Ws::Text(answer.to_string().into())).await;
        return Some((user, false));
    }
    None
}

async fn serve(
    shared: Shared,
    mut socket: WebSocket,
    header_token: Option<String>,
    q: HashMap<String, String>,
) {
    let Some((user, by_header)) = authenticate(&shared, &mut socket, header_token).await else {
        let _ = socket.send(Ws::Close(None)).await;
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    {
        let mut s = shared.inner.lock().expect("double");
        let wanted = q.get("connection_id").cloned().unwrap_or_default();
        let from: u64 = q.get("sequence_number").and_then(|v| v.parse().ok()).unwrap_or(0);
        let resumable = by_header
            && s.conns
                .get(&wanted)
                .is_some_and(|c| c.user_id == user.id && from >= c.lost_before && from <= c.next_seq);
        if resumable {
            let conn = s.conns.get_mut(&wanted).expect("resumable");
            for (seq, frame) in &conn.dead {
                if *seq >= from {
                    let _ = tx.send(frame.clone());
                }
            }
            conn.live = Some(tx);
            s.opened.push((user.id.clone(), true));
        } else {
            let id = s.new_id("cn");
            let hello = json!({
                "event": "hello",
                "data": {"connection_id": id, "server_version": "10.5.0.10.5.0.double.false", "server_hostname": "double"},
                "broadcast": {"omit_users": null, "user_id": user.id, "channel_id": "", "team_id": "", "connection_id": "", "omit_connection_id": ""},
                "seq": 0,
            })
            .to_string();
            let _ = tx.send(hello.clone());
            s.conns.insert(
                id,
                Conn {
                    user_id: user.id.clone(),
                    next_seq: 1,
                    dead: VecDeque::from([(0, hello)]),
                    lost_before: 0,
                    live: Some(tx),
                },
            );
            s.opened.push((user.id.clone(), false));
        }
    }
    shared.changed.notify_waiters();
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(frame) => {
                    if socket.send(Ws::Text(frame.into())).await.is_err() {
                        break;
                    }
                }
                // The test dropped the socket (`drop_sockets`).
                None => {
                    let _ = socket.send(Ws::Close(None)).await;
                    break;
                }
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Ws::Text(text))) => {
                    let v: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
                    // The server ignores a challenge on an authenticated
                    // socket; it answers other requests.
                    if v["action"] == "authentication_challenge" {
                        continue;
                    }
                    if let Some(seq) = v["seq"].as_u64() {
                        let answer = json!({"status": "OK", "seq_reply": seq});
                        if socket.send(Ws::Text(answer.to_string().into())).await.is_err() {
                            break;
                        }
                    }
                }
                Some(Ok(_)) => {}
                _ => break,
            },
        }
    }
    drop(rx);
    let mut s = shared.inner.lock().expect("double");
    for c in s.conns.values_mut().filter(|c| c.user_id == user.id) {
        if c.live.as_ref().is_some_and(|l| l.is_closed()) {
            c.live = None;
        }
    }
    drop(s);
    shared.changed.notify_waiters();
}
