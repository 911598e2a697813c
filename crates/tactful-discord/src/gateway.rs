//! One bot's gateway session: identified over HTTP, connected and resumed
//! (twilight does it), closes explained, and the gateway's events noted.

use super::*;

/// A task aborted when dropped.
pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why a bot could not connect; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    #[error("cannot read the bot's user (is the token right?): {0}")]
    Identify(String),
    #[error("{}", closed(.0))]
    Closed(Option<(u16, String)>),
}

impl ConnectError {
    /// Whether twilight gives the connection up after this (it resumes or
    /// reconnects after every other close).
    fn is_final(&self) -> bool {
        matches!(self, ConnectError::Closed(Some((code, _))) if matches!(code, 4004 | 4010..=4014))
    }
}

/// What a gateway close means, and what to check.
pub(crate) fn closed(frame: &Option<(u16, String)>) -> String {
    let Some((code, reason)) = frame else {
        return "the gateway connection ended".to_owned();
    };
    let what = match code {
        4004 => "Discord refused the bot token (4004 Authentication failed): check the persona's discord.token (the Bot page of the application)".to_owned(),
        4014 => "Discord refused the intents (4014 Disallowed intents): turn on the Message Content intent on the Bot page of the application".to_owned(),
        4013 => "Discord refused the intents (4013 Invalid intents)".to_owned(),
        4010..=4012 => format!("Discord refused the connection ({code}: a shard or API version it does not take)"),
        _ => format!("the gateway closed the connection ({code})"),
    };
    if reason.trim().is_empty() {
        what
    } else {
        format!(
            "{what}; Discord said: {}",
            reason.chars().take(200).collect::<String>()
        )
    }
}

impl Shared {
    /// Identifies persona `i`'s bot, then, if this process holds it
    /// (`listening`), keeps its gateway session until the service stops.
    pub(crate) async fn keep_connected(self: Arc<Self>, i: usize, listening: bool) {
        let persona = self.settings.personas[i].clone();
        let mut backoff = self.roster.backoff(i, listening);
        backoff.until_ok(|| self.identify(i)).await;
        if !listening {
            return;
        }
        self.wait_for_the_others().await;
        backoff.reset();
        // Messages are worked on (thread and role lookups over HTTP) by a
        // task of their own, in order: the gateway loop must keep polling,
        // or twilight cannot send its heartbeats and Discord drops the
        // session. The queue is bounded: a worker that far behind slows
        // the reading down rather than growing.
        let (queue, mut work) =
            tokio::sync::mpsc::channel::<Box<twilight_model::channel::Message>>(MESSAGE_QUEUE);
        let worker = {
            let shared = self.clone();
            tokio::spawn(async move {
                while let Some(msg) = work.recv().await {
                    shared.heard(i, &msg).await;
                }
            })
        };
        let _worker = AbortOnDrop(worker);
        loop {
            let intents = Intents::GUILDS
                | Intents::GUILD_MESSAGES
                | Intents::DIRECT_MESSAGES
                | Intents::MESSAGE_CONTENT;
            let mut config = ConfigBuilder::new(persona.token.clone(), intents);
            if self.settings.gateway_url != config::DEFAULT_GATEWAY_URL {
                config = config.proxy_url(self.settings.gateway_url.clone());
            }
            let mut shard = Shard::with_config(ShardId::ONE, config.build());
            tracing::info!(persona = %persona.id, "Discord: connecting to the gateway");
            let mut closed = ConnectError::Closed(None);
            while let Some(item) = shard.next_event(EventTypeFlags::all()).await {
                match item {
                    Ok(Event::MessageCreate(m)) => {
                        let _ = queue.send(Box::new(m.message)).await;
                    }
                    Ok(Event::GatewayClose(Some(frame))) => {
                        let why = ConnectError::Closed(Some((frame.code, frame.reason.to_string())));
                        if why.is_final() {
                            // The stream ends next: said once there.
                            closed = why;
                        } else {
                            // twilight resumes or reconnects by itself.
                            tracing::info!(persona = %persona.id, "Discord: {why}; reconnecting");
                        }
                    }
                    Ok(event) => {
                        if matches!(event, Event::Ready(_) | Event::Resumed) {
                            backoff.connected();
                        }
                        self.event(i, event);
                    }
                    // twilight tries again by itself (after 1, 2, 4… s), so
                    // this is said at most that often.
                    Err(e) => {
                        let why = format!("cannot reach the gateway at {}: {e}", self.settings.gateway_url);
                        backoff.account().down(&why);
                        tracing::warn!(
                            persona = %persona.id,
                            "Discord: {why}; retrying (is the address right, and reachable through the firewall or proxy?)"
                        );
                    }
                }
            }
            backoff.wait(&closed).await;
        }
    }

    /// Learns the bot's user id (mentions name it).
    pub(crate) async fn identify(&self, i: usize) -> Result<(), ConnectError> {
        let me = send::deadline(self.clients[i].current_user())
            .await
            .map_err(|e| ConnectError::Identify(e.0))?
            .model()
            .await
            .map_err(|e| ConnectError::Identify(e.to_string()))?;
        tracing::info!(persona = %self.settings.personas[i].id, bot = %me.name, "Discord: bot identified");
        if let Ok(mut bots) = self.bots.write() {
            bots[i].1 = Some((me.id, me.name));
        }
        self.roster.identified(i);
        Ok(())
    }

    pub(crate) async fn wait_for_the_others(&self) {
        if !self.roster.all_identified(IDENTIFY_WAIT).await {
            tracing::warn!(
                "Discord: not every bot could say who it is; mentions of the missing ones are not recognised yet"
            );
        }
    }

    pub(crate) fn event(&self, i: usize, event: Event) {
        match event {
            Event::Ready(r) => {
                tracing::info!(persona = %self.settings.personas[i].id, guilds = r.guilds.len(), "Discord gateway is live")
            }
            Event::GuildCreate(g) => {
                if let GuildCreate::Available(guild) = *g {
                    let me = self.user_of(i);
                    if let Some(m) = guild.members.iter().find(|m| Some(m.user.id) == me)
                        && let Ok(mut roles) = self.roles.lock()
                    {
                        roles.insert((i, guild.id), (tokio::time::Instant::now(), m.roles.clone()));
                    }
                    guild.threads.iter().for_each(|t| self.note_thread(t));
                    guild.channels.iter().for_each(|c| self.note_thread(c));
                }
            }
            Event::ThreadCreate(t) => self.note_thread(&t.0),
            Event::ThreadUpdate(t) => self.note_thread(&t.0),
            Event::ThreadListSync(s) => s.threads.iter().for_each(|t| self.note_thread(t)),
            _ => {}
        }
    }
}
