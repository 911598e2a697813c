//! Everything that comes in from Slack: each persona's app identified,
//! its Socket Mode listener, and every envelope handed in, stored before
//! it is acknowledged.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use slack_morphism::prelude::*;
use tokio::time::Instant;

use crate::inbound::{self, KnownBot, Raw, Seen, to_message};
use crate::own::{Own, own_change};
use crate::{Client, Identity, Person, Shared, send};

/// How long a bot waits for the others to say who they are.
const IDENTIFY_WAIT: Duration = Duration::from_secs(30);

/// How long an envelope may take from its arrival to being stored before
/// it goes unacknowledged (Slack waits 3 s, then delivers it again).
const TAKE_WITHIN: Duration = Duration::from_millis(2500);

/// How long the names of a message's people may take to look up (the
/// lookups go on in the background and fill the cache).
pub(crate) const NAMES_WITHIN: Duration = Duration::from_millis(600);

/// How fast an app's allowance for name waits refills: [`NAMES_WITHIN`]
/// per this ([`crate::allowance`]).
pub(crate) const NAMES_REFILL: Duration = Duration::from_millis(2500);

/// At most this many people are looked up for one message.
const PEOPLE_PER_MESSAGE: usize = 8;

/// Why a bot could not connect; retried with backoff.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("auth.test refused the bot token (is it the Bot User OAuth Token of an installed app?): {0}")]
    Identify(String),
    #[error(
        "apps.connections.open refused the app-level token (it needs the connections:write scope, and Socket Mode on in the app's settings): {0}"
    )]
    AppToken(String),
}

/// Why an envelope is left unacknowledged (Slack delivers it again).
#[derive(Debug, thiserror::Error)]
enum NotTaken {
    #[error("a message could not be stored ({0}); Slack will deliver it again")]
    Refused(String),
    #[error("a message was not stored within {0:?}; Slack will deliver it again")]
    Late(Duration),
    #[error("another copy of a message could not be stored; Slack will deliver it again")]
    CopyRefused,
    #[error(
        "cannot tell whether {0}, who mentioned a persona, is a bot (users.info did not answer; the app needs the users:read scope); Slack will deliver it again"
    )]
    Unknown(String),
}

/// A message claimed by the copy that stores it. However that ends (an
/// error, a panic), the copies waiting are told, and a message not taken
/// is forgotten, so Slack's next delivery of it is heard.
struct Claim<'a> {
    shared: &'a Shared,
    key: (String, String),
    done: Option<tokio::sync::watch::Sender<Option<bool>>>,
    taken: bool,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        // Both locks, in the order a claim takes them: no copy can find
        // the message neither being taken nor forgotten.
        let (seen, pending) = (self.shared.seen.lock(), self.shared.pending.lock());
        if let Ok(mut pending) = pending {
            pending.remove(&self.key);
        }
        if !self.taken
            && let Ok(mut seen) = seen
        {
            seen.forget(&self.key);
        }
        if let Some(done) = self.done.take() {
            let _ = done.send(Some(self.taken));
        }
    }
}

/// What a listener's callbacks get: the platform and which persona's app
/// heard the event.
#[derive(Clone)]
struct Listening {
    shared: Arc<Shared>,
    index: usize,
}

/// Socket Mode's push events: every `events_api` envelope. The envelope is
/// acknowledged when this returns `Ok`.
async fn on_push(
    event: SlackPushEventCallback,
    _client: Arc<Client>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    let arrived = Instant::now();
    let listening = state.read().await.get_user_state::<Listening>().cloned();
    match listening {
        Some(l) => l
            .shared
            .heard(l.index, event, arrived)
            .await
            .map_err(|e| e.into()),
        None => Ok(()),
    }
}

/// Every error of the listener: a frame that does not parse (acknowledged
/// by slack-morphism, since it never parses better) or a message tactful
/// could not take (not acknowledged, so Slack delivers it again).
fn on_error(
    err: Box<dyn std::error::Error + Send + Sync>,
    _: Arc<Client>,
    _: SlackClientEventsUserState,
) -> HttpStatusCode {
    // Clipped: the error quotes the whole frame.
    tracing::warn!("{}", send::said(&err));
    HttpStatusCode::SERVICE_UNAVAILABLE
}

/// Shuts a listener's sockets down when its task ends (the service
/// stopping aborts it).
struct ShutdownOnDrop(Arc<SlackClientSocketModeListener<SlackClientHyperHttpsConnector>>);

impl Drop for ShutdownOnDrop {
    fn drop(&mut self) {
        let listener = self.0.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { listener.shutdown().await });
        }
    }
}

/// How a person is shown: their display name, else their full name, else
/// their user name.
fn display_name(u: &SlackUser) -> String {
    let profile = u.profile.as_ref();
    [
        profile.and_then(|p| p.display_name.clone()),
        profile.and_then(|p| p.real_name.clone()),
        u.real_name.clone(),
        u.name.clone(),
    ]
    .into_iter()
    .flatten()
    .find(|n| !n.trim().is_empty())
    .unwrap_or_else(|| u.id.to_string())
}

impl Shared {
    /// Identifies persona `i`'s bot, then, if this process holds it
    /// (`listening`), checks its app-level token and listens until the
    /// service stops.
    pub(crate) async fn keep_connected(self: Arc<Self>, i: usize, listening: bool) {
        let persona = self.settings.personas[i].clone();
        let mut backoff = self.roster.backoff(i, listening);
        backoff.until_ok(|| self.identify(i)).await;
        if !listening {
            return;
        }
        loop {
            match self.check_app_token(i).await {
                Ok(()) => break,
                Err(e) => backoff.wait(&e).await,
            }
        }
        self.wait_for_the_others().await;
        let env = SlackClientEventsListenerEnvironment::new(self.client.clone())
            .with_error_handler(on_error)
            .with_user_state(Listening {
                shared: self.clone(),
                index: i,
            });
        // slack-morphism does not export the hello event's type; its own
        // hello callback logs at debug.
        let callbacks = SlackSocketModeListenerCallbacks::new().with_push_events(on_push);
        // One socket per app, so envelopes are taken in order; a lost
        // socket is opened again at once, then every 5 s while Slack
        // refuses.
        let config = SlackClientSocketModeConfig::new()
            .with_max_connections_count(1)
            .with_initial_backoff_in_seconds(0)
            .with_reconnect_timeout_in_seconds(5);
        let listener = Arc::new(SlackClientSocketModeListener::new(
            &config,
            Arc::new(env),
            callbacks,
        ));
        let app_token = SlackApiToken::new(persona.app_token.clone().into());
        if let Err(e) = listener.listen_for(&app_token).await {
            let why = format!("cannot listen: {}", send::one_line(&e.to_string()));
            backoff.account().down(&why);
            tracing::error!(persona = %persona.id, "Slack: {why}");
            return;
        }
        // Before `start`: a task stopped while the sockets open (another
        // process took the app over) shuts them down too.
        let _stop = ShutdownOnDrop(listener.clone());
        tracing::info!(persona = %persona.id, "Slack: opening Socket Mode");
        listener.start().await;
        backoff.connected();
        if let Ok(mut l) = self.listeners.lock() {
            l.insert(i, listener);
        }
        std::future::pending::<()>().await;
    }

    /// Learns the bot's user id (mentions name it) with `auth.test`.
    async fn identify(&self, i: usize) -> Result<(), ConnectError> {
        let persona = &self.settings.personas[i];
        let me = send::with_retry(&self.settings.api_url, || async {
            self.session(i).auth_test().await
        })
        .await
        .map_err(|e| ConnectError::Identify(e.0))?;
        let name = me.user.clone().unwrap_or_else(|| me.user_id.to_string());
        tracing::info!(persona = %persona.id, bot = %name, team = %me.team_id, "Slack: bot identified");
        if let Ok(mut bots) = self.bots.write() {
            bots[i] = Some(Identity {
                user: me.user_id.to_string(),
                bot_id: me.bot_id.map(|b| b.to_string()),
                name,
            });
        }
        self.roster.identified(i);
        Ok(())
    }

    /// `tactful doctor`'s checks for persona `i`: its bot token
    /// (`auth.test`) and its app-level token (`apps.connections.open`),
    /// changing nothing.
    pub(crate) async fn probe(&self, i: usize) -> Vec<tactful_runtime::Probe> {
        use tactful_runtime::Probe;
        let persona = &self.settings.personas[i];
        let bot = Probe::run(
            format!("Slack {} (auth.test)", persona.id),
            "check the persona's slack.bot_token (OAuth & Permissions: the Bot User OAuth Token, xoxb-…) and that the app is installed",
            async {
                let me = self
                    .session(i)
                    .auth_test()
                    .await
                    .map_err(|e| send::failed(&e, &self.settings.api_url))?;
                Ok::<_, String>(format!(
                    "{} in team {}",
                    me.user.clone().unwrap_or_else(|| me.user_id.to_string()),
                    me.team_id
                ))
            },
        )
        .await;
        let app_token = SlackApiToken::new(persona.app_token.clone().into());
        let app = Probe::run(
            format!("Slack {} (apps.connections.open)", persona.id),
            "check the persona's slack.app_token (Basic Information: an app-level token, xapp-…, with connections:write) and that Socket Mode is on",
            async {
                self.client
                    .open_session(&app_token)
                    .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
                    .await
                    .map_err(|e| send::failed(&e, &self.settings.api_url))?;
                Ok::<_, String>("Socket Mode open to this app".to_owned())
            },
        )
        .await;
        vec![bot, app]
    }

    /// Checks the app-level token: the listener only logs a refusal and
    /// retries; asked once here, a wrong one is said plainly.
    async fn check_app_token(&self, i: usize) -> Result<(), ConnectError> {
        let app_token = SlackApiToken::new(self.settings.personas[i].app_token.clone().into());
        send::with_retry(&self.settings.api_url, || async {
            self.client
                .open_session(&app_token)
                .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
                .await
        })
        .await
        .map(|_| ())
        .map_err(|e| ConnectError::AppToken(e.0))
    }

    async fn wait_for_the_others(&self) {
        if !self.roster.all_identified(IDENTIFY_WAIT).await {
            tracing::warn!(
                "Slack: not every bot could say who it is; mentions of the missing ones are not recognised yet"
            );
        }
    }

    /// A Web API session under persona `i`'s bot token.
    pub(crate) fn session(&self, i: usize) -> SlackClientSession<'_, SlackClientHyperHttpsConnector> {
        self.client.open_session(&self.tokens[i])
    }

    /// A persona's own post, edit or deletion, heard: the thread state
    /// follows it, as the send path's does where the post was made (see
    /// [`crate::own`]). Every app of this process hears it: following it
    /// twice changes nothing.
    fn follow_own(&self, ev: &SlackMessageEvent) {
        let Some(own) = own_change(ev, &self.known_bots(), tactful_runtime::PLACEHOLDER) else {
            return;
        };
        self.update_threads(|t| match &own {
            Own::Posted {
                channel,
                ts,
                thread,
                answer,
            } => t.posted(channel, ts, thread.as_deref(), *answer),
            Own::Edited { channel, ts, answer } => *answer && t.answered(channel, ts),
            Own::Deleted { channel, ts } => t.deleted(channel, ts),
        });
    }

    fn known_bots(&self) -> Vec<KnownBot> {
        let bots = self.bots.read().map(|b| b.clone()).unwrap_or_default();
        self.settings
            .personas
            .iter()
            .zip(bots)
            .map(|(p, id)| KnownBot {
                persona: p.id.clone(),
                user: id.as_ref().map(|i| i.user.clone()),
                bot_id: id.and_then(|i| i.bot_id),
            })
            .collect()
    }

    /// The people `raw` is from or mentions, looked up (with persona `i`'s
    /// token) where not remembered. Waits [`NAMES_WITHIN`] at most; slower
    /// lookups finish in the background and are remembered for next time.
    async fn people_for(self: &Arc<Self>, i: usize, raw: &Raw, bots: &[KnownBot]) -> HashMap<String, Person> {
        let mut wanted: Vec<String> = Vec::new();
        for u in raw
            .user
            .iter()
            .cloned()
            .chain(inbound::mentioned_users(&raw.text))
        {
            let persona = bots.iter().any(|b| b.user.as_deref() == Some(u.as_str()));
            if !persona && !wanted.contains(&u) && wanted.len() < PEOPLE_PER_MESSAGE {
                wanted.push(u);
            }
        }
        let mut known = HashMap::new();
        let mut missing = Vec::new();
        if let Ok(cache) = self.people.lock() {
            for u in wanted {
                match cache.get(&u) {
                    Some(p) => {
                        known.insert(u, p.clone());
                    }
                    None => missing.push(u),
                }
            }
        }
        let lookups: Vec<_> = missing
            .into_iter()
            .map(|u| {
                let shared = self.clone();
                tokio::spawn(async move { shared.look_up(i, u).await })
            })
            .collect();
        if lookups.is_empty() {
            return known;
        }
        // The wait comes out of the app's allowance: envelopes queued
        // behind this one wait as long as it does.
        let start = Instant::now();
        let allowed = self.name_waits[i]
            .lock()
            .map(|mut a| a.available(start))
            .unwrap_or_default()
            .min(NAMES_WITHIN);
        let deadline = start + allowed;
        for lookup in lookups {
            match tokio::time::timeout_at(deadline, lookup).await {
                Ok(Ok(Some((u, p)))) => {
                    known.insert(u, p);
                }
                Ok(_) => {}
                Err(_) => {
                    tracing::debug!("Slack: users.info is slow; names stay ids until it answers");
                    break;
                }
            }
        }
        if let Ok(mut a) = self.name_waits[i].lock() {
            a.spend(start.elapsed());
        }
        known
    }

    /// Asks `users.info` about `user`, and remembers the answer.
    async fn look_up(&self, i: usize, user: String) -> Option<(String, Person)> {
        let req = SlackApiUsersInfoRequest::new(user.clone().into());
        match self.session(i).users_info(&req).await {
            Ok(r) => {
                let person = Person {
                    name: display_name(&r.user),
                    is_bot: r.user.flags.is_bot == Some(true),
                };
                if let Ok(mut cache) = self.people.lock() {
                    cache.insert(user.clone(), person.clone());
                }
                Some((user, person))
            }
            Err(e) => {
                tracing::debug!(%user, "Slack: users.info failed: {}", send::one_line(&e.to_string()));
                None
            }
        }
    }

    /// One push event, heard by persona `i`'s app: handed in once, and
    /// stored before it is acknowledged. A second copy of a message still
    /// being stored waits for it: were it acknowledged at once and the
    /// first copy then refused, nothing would make Slack deliver it again.
    async fn heard(
        self: &Arc<Self>,
        i: usize,
        ev: SlackPushEventCallback,
        arrived: Instant,
    ) -> Result<(), NotTaken> {
        let (raw, mention_event) = match &ev.event {
            SlackEventCallbackBody::Message(m) => {
                self.follow_own(m);
                (inbound::from_message(m), false)
            }
            SlackEventCallbackBody::AppMention(m) => (inbound::from_app_mention(m), true),
            SlackEventCallbackBody::Unknown(v) => {
                let kind = v["type"].as_str().unwrap_or_default();
                if matches!(kind, "message" | "app_mention") {
                    tracing::warn!(
                        "Slack: an event of type {kind} in a shape slack-morphism does not know; skipped: {}",
                        send::one_line(&v.to_string())
                    );
                }
                (None, false)
            }
            _ => (None, false),
        };
        let Some(mut raw) = raw else {
            return Ok(());
        };
        let bots = self.known_bots();
        let mut people = None;
        let key = raw.key();
        let taken = || {
            let (seen, pending) = (self.seen.lock(), self.pending.lock());
            seen.is_ok_and(|s| s.contains(&key)) && pending.is_ok_and(|p| !p.contains_key(&key))
        };
        if mention_event && taken() {
            // Its `message` copy was stored already.
            return Ok(());
        }
        if mention_event {
            // An `app_mention` does not say whether its author is a bot;
            // the profile does, and is asked before the message is
            // claimed: one that cannot be told is left to its `message`
            // copy, or to Slack's next delivery.
            let found = self.people_for(i, &raw, &bots).await;
            let persona = |u: &String| bots.iter().any(|b| b.user.as_ref() == Some(u));
            match raw.user.as_ref() {
                Some(u) if persona(u) => {}
                Some(u) => match found.get(u) {
                    Some(p) => raw.bot_message = p.is_bot,
                    None => return Err(NotTaken::Unknown(u.clone())),
                },
                None => return Ok(()),
            }
            people = Some(found);
        }
        let (claim, pending) = {
            let (Ok(mut seen), Ok(mut pending)) = (self.seen.lock(), self.pending.lock()) else {
                return Err(NotTaken::Refused("a lock was poisoned by a panic".into()));
            };
            if seen.first(key.clone()) {
                let (tx, rx) = tokio::sync::watch::channel(None);
                pending.insert(key.clone(), rx);
                let claim = Claim {
                    shared: self,
                    key,
                    done: Some(tx),
                    taken: false,
                };
                (Some(claim), None)
            } else {
                (None, pending.get(&key).cloned())
            }
        };
        let Some(mut claim) = claim else {
            // A copy: taken already, or being taken.
            let Some(mut first) = pending else {
                return Ok(());
            };
            let left = (arrived + TAKE_WITHIN).saturating_duration_since(Instant::now());
            return match tokio::time::timeout(left, first.wait_for(Option::is_some)).await {
                Ok(Ok(v)) if *v == Some(true) => Ok(()),
                Ok(_) => Err(NotTaken::CopyRefused),
                Err(_) => Err(NotTaken::Late(TAKE_WITHIN)),
            };
        };
        let outcome = self.take(i, &ev, &mut raw, &bots, people, arrived).await;
        claim.taken = outcome.is_ok();
        outcome
    }

    /// Hands a message in, once stored.
    async fn take(
        self: &Arc<Self>,
        i: usize,
        ev: &SlackPushEventCallback,
        raw: &mut Raw,
        bots: &[KnownBot],
        people: Option<HashMap<String, Person>>,
        arrived: Instant,
    ) -> Result<(), NotTaken> {
        if let (Some(t), Ok(mut threads)) = (raw.thread(), self.threads.lock()) {
            threads.heard(&raw.channel, &raw.ts, t);
        }
        let people = match people {
            Some(p) => p,
            None => self.people_for(i, raw, bots).await,
        };
        let names: HashMap<String, String> = people.into_iter().map(|(u, p)| (u, p.name)).collect();
        let reply_to = raw.thread().and_then(|t| {
            self.threads
                .lock()
                .ok()
                .map(|threads| threads.reply_to(&raw.channel, t))
        });
        let team = ev.team_id.to_string();
        let seen = Seen {
            receiver: &self.settings.personas[i].id,
            team: &team,
            bots,
            names: &names,
            thread_reply_to: reply_to.as_deref(),
            everyone_addresses: self.settings.everyone_addresses,
        };
        let Some(msg) = to_message(raw, seen) else {
            return Ok(());
        };
        let handle = self.roster.runtime();
        let Some(handle) = handle else {
            return Ok(());
        };
        let left = (arrived + TAKE_WITHIN).saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, handle.inbound_saved(msg, Vec::new())).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(NotTaken::Refused(e.to_string())),
            Err(_) => Err(NotTaken::Late(TAKE_WITHIN)),
        }
    }
}
