//! The live transcript of rooms other processes own (`[cluster]`): a
//! console shows every room, whichever process sharing the store decides
//! it.
//!
//! A console watching (one room, or every room) says so on
//! [`LIVE_CHANNEL`] when it starts and every [`WATCH_EVERY`] while it
//! watches; a process that heard it sends its lines about the room on the
//! same channel for [`WATCH_FOR`] after the last word, starting with a
//! `feed` line that names it to the watcher. Nothing is sent
//! while nobody watches, so the decisions of thousands of rooms a second
//! cost nothing here until an operator looks. The lines are not kept: a
//! console that missed some (a notification lost with a connection) can
//! reload the room from the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tactful_store::{Announcer, LIVE_CHANNEL, LiveNote, Location};

use super::feed::Feed;

/// How often a watching console says so again.
pub const WATCH_EVERY: Duration = Duration::from_secs(5);
/// How long a process sends lines after a watcher last said so: three
/// missed words, and it stops.
pub const WATCH_FOR: Duration = Duration::from_secs(15);

/// What this process's consoles and the others' watch.
#[derive(Debug)]
pub struct Elsewhere {
    announcer: Announcer,
    /// What this process says about itself (host, pid, listen address).
    about: String,
    /// Rooms other processes' consoles watch (`None`: every room), and
    /// until when.
    watched: Mutex<HashMap<Option<String>, Instant>>,
    /// Rooms this process's consoles watch, with how many streams each.
    watching: Mutex<HashMap<Option<String>, usize>>,
}

impl Elsewhere {
    /// Announces on the database at `at`, as the process `about` says.
    pub fn start(at: &Location, about: &str) -> Result<Arc<Elsewhere>, tactful_store::StoreError> {
        Ok(Arc::new(Elsewhere {
            announcer: Announcer::start(at)?,
            about: about.to_owned(),
            watched: Mutex::new(HashMap::new()),
            watching: Mutex::new(HashMap::new()),
        }))
    }

    /// Whether another process's console watches `room` now.
    pub fn watches(&self, room: &str) -> bool {
        let mut watched = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        if watched.is_empty() {
            return false;
        }
        let now = Instant::now();
        watched.retain(|_, until| *until > now);
        watched.contains_key(&None) || watched.contains_key(&Some(room.to_owned()))
    }

    /// Whether any other process's console may be watching (a cheap first
    /// check on the trace's path).
    pub fn anyone_watching(&self) -> bool {
        !self
            .watched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// Sends a line about `room` to the consoles watching it elsewhere.
    pub fn send_line(&self, room: &str, json: &str) {
        match LiveNote::line(room, json) {
            Some(payload) => {
                if !self.announcer.announce(LIVE_CHANNEL, payload) {
                    tracing::debug!(room, "a live line for other processes' consoles was dropped");
                }
            }
            None => tracing::debug!(room, "a live line too large to send to other processes' consoles"),
        }
    }

    /// A console here starts watching `room`: said at once, and again
    /// every [`WATCH_EVERY`] until the guard is dropped.
    pub fn watch(self: &Arc<Self>, room: Option<String>) -> Watching {
        *self
            .watching
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(room.clone())
            .or_default() += 1;
        self.announcer
            .announce(LIVE_CHANNEL, LiveNote::watch(room.as_deref()));
        Watching {
            elsewhere: self.clone(),
            room,
        }
    }

    /// Says again what this process's consoles watch.
    fn renew(&self) {
        let rooms: Vec<Option<String>> = self
            .watching
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        for room in rooms {
            self.announcer
                .announce(LIVE_CHANNEL, LiveNote::watch(room.as_deref()));
        }
    }

    /// Takes a note another process sent: a watch, or a line for this
    /// process's consoles.
    fn heard(&self, note: LiveNote, feed: &Feed) {
        match note {
            LiveNote::Watch { room, .. } => {
                let now = Instant::now();
                let before = self
                    .watched
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(room.clone(), now + WATCH_FOR);
                // A new watcher is told this process follows it: a `feed`
                // line, from which on it gets this process's lines.
                if before.is_none_or(|until| until <= now) {
                    let room = room.unwrap_or_default();
                    let line = serde_json::json!({ "type": "feed", "room": room, "process": self.about });
                    self.send_line(&room, &line.to_string());
                }
            }
            LiveNote::Line { room, json, .. } => feed.publish(&room, &json),
        }
    }
}

/// A console's stream watching a room; the watch ends when it is dropped.
#[derive(Debug)]
pub struct Watching {
    elsewhere: Arc<Elsewhere>,
    room: Option<String>,
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut watching = self
            .elsewhere
            .watching
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = watching.get_mut(&self.room) {
            *n -= 1;
            if *n == 0 {
                watching.remove(&self.room);
            }
        }
    }
}

/// Listens to the other processes' notes (listening again when the
/// connection ends) and says again, every [`WATCH_EVERY`], what this
/// process's consoles watch.
pub fn follow(feed: Feed, elsewhere: Arc<Elsewhere>, at: Location) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(WATCH_EVERY);
        loop {
            match tactful_store::listen(&at, LIVE_CHANNEL) {
                Ok(mut notes) => loop {
                    tokio::select! {
                        note = notes.recv() => match note {
                            Some(n) => {
                                if let Some(note) = LiveNote::parse_other(&n.payload) {
                                    elsewhere.heard(note, &feed);
                                }
                            }
                            None => {
                                tracing::warn!("listening to other processes' live transcripts stopped; listening again");
                                break;
                            }
                        },
                        _ = every.tick() => elsewhere.renew(),
                    }
                },
                Err(e) => tracing::warn!("cannot listen to other processes' live transcripts: {e}"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The announcer connects only when it has something to send: a
    /// database nobody listens on is enough here (what is sent is tested
    /// in `tests/cluster.rs`).
    fn elsewhere() -> Arc<Elsewhere> {
        let at = Location::postgres("postgres://tactful@127.0.0.1:1/nothing").expect("a URL");
        Elsewhere::start(&at, "test").expect("starts")
    }

    #[test]
    fn a_watch_lasts_until_it_is_not_renewed_and_every_room_covers_each() {
        let e = elsewhere();
        let feed = Feed::default();
        assert!(!e.anyone_watching());
        e.heard(
            LiveNote::Watch {
                from: "b".into(),
                room: Some("lobby".into()),
            },
            &feed,
        );
        assert!(e.watches("lobby") && !e.watches("ops"));
        e.heard(
            LiveNote::Watch {
                from: "c".into(),
                room: None,
            },
            &feed,
        );
        assert!(e.watches("ops"), "a console watching every room");
        // Not renewed: gone.
        for until in e.watched.lock().expect("lock").values_mut() {
            *until = Instant::now();
        }
        assert!(!e.watches("lobby") && !e.watches("ops"));
        assert!(!e.anyone_watching(), "pruned");

        let a = e.watch(Some("lobby".into()));
        let b = e.watch(Some("lobby".into()));
        drop(a);
        assert_eq!(
            e.watching.lock().expect("lock").get(&Some("lobby".into())),
            Some(&1)
        );
        drop(b);
        assert!(e.watching.lock().expect("lock").is_empty(), "no stream left");
    }
}
