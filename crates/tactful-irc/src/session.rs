//! One persona's connection: made and made again with backoff, its nick
//! taken back from a fallback, and the sender replies wait for.

use super::*;

/// Taking a persona's own nick back from a fallback one.
#[derive(Default)]
pub(crate) struct Reclaim {
    /// A NICK was sent and not answered yet.
    asked: bool,
    /// The server refused it although it looked free (a nick the network
    /// holds back): no more asking on a timer this connection.
    refused: bool,
}

impl Reclaim {
    fn ask(&mut self, client: &Client, nick: &str) -> Result<(), irc::error::Error> {
        if !self.asked {
            self.asked = true;
            client.send(Command::NICK(nick.to_owned()))?;
        }
        Ok(())
    }
}

impl Shared {
    pub(crate) async fn keep_connected(self: Arc<Self>, i: usize) {
        let persona = self.settings.personas[i].clone();
        let mut backoff = self.roster.backoff_always(i);
        loop {
            let result = self.session(i, &persona, backoff.account()).await;
            if let Ok(mut live) = self.live.lock() {
                live.remove(&persona.id);
            }
            self.ended.notify_waiters();
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            match result {
                // It was up: start the pauses afresh.
                Ok(()) => {
                    backoff.reset();
                    backoff.wait(&"the connection closed").await;
                }
                Err(e) => backoff.wait(&format!("connecting failed: {e}")).await,
            }
        }
    }

    /// One connection, until it drops.
    pub(crate) async fn session(
        &self,
        i: usize,
        persona: &IrcPersona,
        account: &Account,
    ) -> Result<(), irc::error::Error> {
        let s = &self.settings;
        let config = IrcClientConfig {
            nickname: Some(persona.nick.clone()),
            alt_nicks: vec![format!("{}_", persona.nick), format!("{}__", persona.nick)],
            username: Some(
                persona
                    .id
                    .as_str()
                    .chars()
                    .filter(char::is_ascii_alphanumeric)
                    .take(10)
                    .collect(),
            ),
            realname: Some(format!("tactful persona {}", persona.id)),
            nick_password: persona.password.clone(),
            server: Some(s.server.clone()),
            port: Some(s.port),
            use_tls: Some(s.tls),
            channels: s.channels.clone(),
            // tactful paces its own lines; the crate's burst limit would
            // only add a second, hidden queue.
            max_messages_in_burst: Some(u32::MAX),
            ..IrcClientConfig::default()
        };
        let mut client = Client::from_config(config).await?;
        client.identify()?;
        let mut stream = client.stream()?;
        // The nick this connection has: the crate's own idea of it does not
        // follow a NICK we send, so it is followed here.
        let mut nick = String::new();
        let mut reclaim = Reclaim::default();
        let mut retry = tokio::time::interval(s.nick_retry);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let message = tokio::select! {
                next = stream.next() => match next.transpose()? {
                    Some(m) => m,
                    None => break,
                },
                _ = retry.tick() => {
                    // On a fallback nick: is ours free again?
                    if !nick.is_empty() && !text::nick_eq(&nick, &persona.nick) && !reclaim.refused {
                        client.send(Command::ISON(vec![persona.nick.clone()]))?;
                    }
                    continue;
                }
            };
            let from = message.source_nickname().unwrap_or("");
            match &message.command {
                Command::Response(irc::client::prelude::Response::RPL_WELCOME, _) => {
                    nick = client.current_nickname().to_owned();
                    if text::nick_eq(&nick, &persona.nick) {
                        tracing::info!(persona = %persona.id, %nick, "connected to IRC");
                    } else {
                        tracing::warn!(persona = %persona.id, %nick, "connected to IRC, but {} was taken; it takes it back once it is free", persona.nick);
                    }
                    self.set_live(persona, client.sender(), &nick);
                    account.connected();
                    self.connected.notify_waiters();
                }
                // Our own nick changed (taken back, or a fallback).
                Command::NICK(new) if !nick.is_empty() && text::nick_eq(from, &nick) => {
                    nick.clone_from(new);
                    reclaim.asked = false;
                    if text::nick_eq(&nick, &persona.nick) {
                        tracing::info!(persona = %persona.id, %nick, "took its nick back");
                    }
                    self.set_live(persona, client.sender(), &nick);
                }
                // Whoever held our nick left it, or the server says it is
                // not online: take it.
                Command::QUIT(_) | Command::NICK(_)
                    if text::nick_eq(from, &persona.nick) && !text::nick_eq(&nick, &persona.nick) =>
                {
                    reclaim.ask(&client, &persona.nick)?;
                }
                Command::Response(irc::client::prelude::Response::RPL_ISON, args)
                    if !text::nick_eq(&nick, &persona.nick)
                        && !args.last().is_some_and(|online| {
                            online.split(' ').any(|n| text::nick_eq(n, &persona.nick))
                        }) =>
                {
                    reclaim.ask(&client, &persona.nick)?;
                }
                // Refused after all (a nick held back by the network): stop
                // asking on a timer; someone leaving it still brings it back.
                Command::Response(irc::client::prelude::Response::ERR_NICKNAMEINUSE, _) if reclaim.asked => {
                    tracing::warn!(persona = %persona.id, "the server refused {} again; it stops asking every {:?}", persona.nick, s.nick_retry);
                    reclaim = Reclaim {
                        asked: false,
                        refused: true,
                    };
                }
                Command::PRIVMSG(target, body) if !from.is_empty() => {
                    let present = |chan: &str, who: &str| {
                        client
                            .list_users(chan)
                            .is_some_and(|users| users.iter().any(|u| text::nick_eq(u.get_nickname(), who)))
                    };
                    self.heard(i, persona, &nick, from, target, body, &present);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Records the nick persona's connection has now (what the others see,
    /// what mentions of it look like).
    /// The connection `persona` posts through, waiting up to
    /// [`CONNECT_WAIT`] while it is being made (at start, after a drop, or
    /// on a process that has just taken IRC over from one that died: the
    /// turns it carries on are delivered once it is connected, not lost).
    /// Nothing was sent when this fails, so the error is certain.
    pub(crate) async fn sender_of(&self, persona: &PersonaId) -> Result<IrcSender, PlatformError> {
        // `Some(None)`: the service is stopping, no use waiting.
        tactful_runtime::waiting::until(&self.connected, CONNECT_WAIT, || {
            let sender = self
                .live
                .lock()
                .ok()
                .and_then(|l| l.get(persona).map(|(s, _)| s.clone()));
            match sender {
                Some(s) => Some(Some(s)),
                None => self.closing.load(Ordering::SeqCst).then_some(None),
            }
        })
        .await
        .flatten()
        .ok_or_else(|| {
            PlatformError(format!(
                "{persona} is not connected to {} (waited {} s)",
                self.settings.server,
                CONNECT_WAIT.as_secs()
            ))
        })
    }

    pub(crate) fn set_live(&self, persona: &IrcPersona, sender: irc::client::Sender, nick: &str) {
        if let Ok(mut live) = self.live.lock() {
            live.insert(persona.id.clone(), (sender, nick.to_owned()));
        }
    }
}
