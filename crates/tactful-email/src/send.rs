//! What goes out: an answer is one mail, submitted over SMTP with the
//! persona's own login. Mail cannot be edited, deleted or reacted to, so
//! those calls are not offered (the delivery path then sends each answer
//! once, complete).

use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use tactful_core::MsgId;
use tactful_runtime::{Capabilities, OutMessage, Platform, Sent};

use super::*;
use crate::hear::OWN_ID_PREFIX;
use crate::rooms::{Target, target_of};
use crate::write::{Answer, Parent};

/// One persona's submission connection settings.
pub(crate) type Transport = AsyncSmtpTransport<Tokio1Executor>;

/// The longest answer, in characters: a long mail is still one mail.
const MAX_CHARS: usize = 20_000;

/// How long one submission may take.
const SUBMIT_WAIT: Duration = Duration::from_secs(60);

/// The submission transport of `persona`.
pub(crate) fn transport(server: &Endpoint, persona: &EmailPersona) -> Result<Transport, String> {
    let builder = match server.tls {
        Tls::Required => Transport::relay(&server.host),
        Tls::StartTls => Transport::starttls_relay(&server.host),
        Tls::None => Ok(Transport::builder_dangerous(server.host.as_str())),
    }
    .map_err(|e| format!("SMTP {server}: {e}"))?;
    Ok(builder
        .port(server.port)
        .credentials(Credentials::new(
            persona.username.clone(),
            persona.password.clone(),
        ))
        .timeout(Some(Duration::from_secs(30)))
        .build())
}

/// 64-bit FNV-1a: a Message-ID's hash of a reply's key, the same in every
/// build (std's hasher may change between Rust releases).
fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The Message-ID of an answer: from its idempotency key where there is
/// one (the same part sent again after a crash is the same mail to
/// people's clients), else random.
pub(crate) fn message_id(persona: &EmailPersona, room: &RoomId, key: Option<&str>) -> String {
    let domain = persona.address.split_once('@').map_or("localhost", |(_, d)| d);
    let tag = match key {
        Some(k) => fnv1a(&[room.as_str(), persona.id.as_str(), k]),
        None => rand::random::<u64>(),
    };
    format!("{OWN_ID_PREFIX}{tag:016x}.{}@{domain}", persona.id)
}

impl Shared {
    fn transport_of(&self, persona: &EmailPersona) -> Result<Transport, PlatformError> {
        let mut cache = self
            .smtp
            .lock()
            .map_err(|_| PlatformError("email: lock poisoned".into()))?;
        if let Some(t) = cache.get(&persona.id) {
            return Ok(t.clone());
        }
        let t = transport(&self.settings.smtp, persona).map_err(PlatformError)?;
        cache.insert(persona.id.clone(), t.clone());
        Ok(t)
    }

    /// The mail an answer goes under: the one it replies to, else the
    /// thread's latest.
    fn parent_of(&self, msg: &OutMessage<'_>) -> Option<(String, Known)> {
        let known = self.known.lock().ok()?;
        let by_reply = msg.reply_to.and_then(|r| {
            let id = r.as_str().to_owned();
            known.get(&id).cloned().map(|k| (id, k))
        });
        by_reply.or_else(|| {
            let root = msg.thread?.as_str().to_owned();
            let latest = self.latest.lock().ok()?.get(&root).cloned()?;
            known.get(&latest).cloned().map(|k| (latest, k))
        })
    }
}

impl Platform for EmailPlatform {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            can_edit: false,
            can_delete: false,
            native_replies: true,
            max_message_chars: MAX_CHARS,
            reactions: false,
            silence_notices: false,
            deduplicates_sends: false,
            rooms: Some(ROOMS),
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let shared = &self.shared;
            let persona = shared.persona(msg.persona)?;
            let to = match target_of(msg.room)? {
                Target::List(list) => list,
                Target::Direct(_, with) => with,
            };
            let parent = match (shared.parent_of(&msg), msg.reply_to) {
                (Some(p), _) => Some(p),
                // Not read by this process (it started since): looked up
                // in the mailbox, else answered by its id alone.
                (None, Some(to)) => Some(match shared.look_up(persona, to.as_str()).await {
                    Some(k) => (to.as_str().to_owned(), k),
                    None => (
                        to.as_str().to_owned(),
                        Known {
                            subject: String::new(),
                            references: msg
                                .thread
                                .map(|t| vec![t.as_str().to_owned()])
                                .unwrap_or_default(),
                            author: String::new(),
                            text: String::new(),
                            root: msg
                                .thread
                                .map_or_else(|| to.as_str().to_owned(), |t| t.as_str().to_owned()),
                        },
                    ),
                }),
                (None, None) => None,
            };
            let id = message_id(persona, msg.room, msg.key);
            let subject = parent.as_ref().map_or_else(
                || format!("A note from {}", persona.name),
                |(_, k)| k.subject.clone(),
            );
            let answer = Answer {
                from: (&persona.address, &persona.name),
                to: &to,
                subject: &subject,
                id: &id,
                parent: parent.as_ref().map(|(pid, k)| Parent {
                    id: pid,
                    references: &k.references,
                    author: &k.author,
                    text: (!k.text.is_empty()).then_some(k.text.as_str()),
                }),
                text: msg.text,
                signature: persona.signature.as_deref(),
            };
            let mail = write::message(&answer).map_err(|e| PlatformError(format!("email: {e}")))?;
            let transport = shared.transport_of(persona)?;
            match tokio::time::timeout(SUBMIT_WAIT, transport.send(mail)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(PlatformError(format!("SMTP {}: {e}", shared.settings.smtp))),
                Err(_) => {
                    return Err(PlatformError(format!(
                        "SMTP {}: no answer within {} s (the mail may have gone)",
                        shared.settings.smtp,
                        SUBMIT_WAIT.as_secs()
                    )));
                }
            }
            // Remembered as a mail of the thread: an answer to it threads
            // under it, and the next answer in the thread goes under it.
            let root = parent
                .as_ref()
                .map_or_else(|| id.clone(), |(_, k)| k.root.clone());
            let references = parent
                .as_ref()
                .map(|(pid, k)| {
                    write::references(&Parent {
                        id: pid,
                        references: &k.references,
                        author: "",
                        text: None,
                    })
                })
                .unwrap_or_default();
            shared.remember(
                &id,
                crate::Known {
                    subject: write::reply_subject(&subject),
                    references,
                    author: persona.name.clone(),
                    text: msg.text.to_owned(),
                    root,
                },
            );
            Ok(MsgId::new(id))
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.shared.closing.store(true, Ordering::SeqCst);
        })
    }
}
