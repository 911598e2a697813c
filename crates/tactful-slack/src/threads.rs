//! Where Slack messages are, thread-wise: what tactful needs to keep a
//! conversation in its thread and to know whose thread it is.
//!
//! - The thread of every threaded message heard or posted lately, so a
//!   reply to one goes into its thread (Slack wants the parent's `ts` as
//!   `thread_ts`, never a reply's).
//! - For the personas' own posts, whether each went into a thread or to
//!   the channel, so the later parts of a split answer follow the first.
//! - The last message a persona left in each thread: a reply there is a
//!   reply to it, which is how the engine knows the thread is the
//!   persona's. Placeholders count once they hold an answer; when the
//!   last one is deleted, the one before it counts again.
//!
//! The personas' part is saved in the store (the newest entries, bounded),
//! so after a restart a follow-up in a persona's thread still reaches it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tactful_runtime::account::Recent;

/// The key the saved state had when all apps shared one (still read).
pub const STATE_KEY: &str = "slack.threads";

/// The key the process listening with `persona`'s app saves the state
/// under. One key an app: processes sharing a store that listen with
/// different apps each save what their apps heard, where with one key for
/// all the last to save wiped the others' threads (a thread in a channel
/// only one app is in was then no longer the persona's after a restart).
pub fn state_key(persona: &str) -> String {
    format!("{STATE_KEY}:{persona}")
}

/// Whether `key` holds a thread state: an app's, or the one all apps
/// shared before.
fn is_state_key(key: &str) -> bool {
    key.strip_prefix(STATE_KEY)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
}

/// How many entries are remembered in memory, per map.
const REMEMBERED: usize = 4096;

/// How many of the newest entries are saved, per map.
const SAVED: usize = 256;

/// A message: its channel and `ts`.
type At = (String, String);

/// What is saved across restarts.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Saved {
    /// `(channel, thread, ts)`: the last persona message in a thread.
    last: Vec<(String, String, String)>,
    /// `(channel, ts, thread)`: a persona message posted in a thread.
    posted: Vec<(String, String, String)>,
}

/// The maps; see the module's documentation.
#[derive(Debug)]
pub struct Threads {
    /// The thread each threaded message is in, heard or posted (a
    /// persona message missing here went to the channel, or is forgotten).
    thread_of: Recent<At, String>,
    /// The last persona answer in each thread, by channel and parent.
    last: Recent<At, String>,
    /// For a persona message that became a thread's last: the one before
    /// it, which counts again if it is deleted.
    before: Recent<At, String>,
    /// The newest saved entries, oldest first.
    saved: Saved,
}

impl Default for Threads {
    fn default() -> Self {
        Threads {
            thread_of: Recent::new(REMEMBERED),
            last: Recent::new(REMEMBERED),
            before: Recent::new(REMEMBERED),
            saved: Saved::default(),
        }
    }
}

fn at(channel: &str, ts: &str) -> At {
    (channel.to_owned(), ts.to_owned())
}

/// A Slack timestamp (`1700000000.000100`) as something that orders by
/// time.
fn time_of(ts: &str) -> (u64, u64) {
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, ""));
    // Six digits after the point, as Slack writes them.
    let frac: String = frac.chars().chain(std::iter::repeat('0')).take(6).collect();
    (secs.parse().unwrap_or(0), frac.parse().unwrap_or(0))
}

/// Whether Slack timestamp `a` is after `b`.
fn later(a: &str, b: &str) -> bool {
    time_of(a) > time_of(b)
}

/// Keeps the newest `SAVED` entries of `v` by time (`key`: an entry's
/// message, channel and thread), oldest first: states merged from several
/// listeners keep their newest threads whatever order they came in.
fn newest(
    v: &mut Vec<(String, String, String)>,
    key: impl Fn(&(String, String, String)) -> (&str, &str, &str),
) {
    v.sort_by(|a, b| {
        let ((ta, ca, ha), (tb, cb, hb)) = (key(a), key(b));
        (time_of(ta), ca, ha).cmp(&(time_of(tb), cb, hb))
    });
    trim(v);
}

/// Keeps the newest `SAVED` of `v`.
fn trim<T>(v: &mut Vec<T>) {
    if v.len() > SAVED {
        v.drain(..v.len() - SAVED);
    }
}

impl Threads {
    /// The maps as saved in the store (`None`, or what does not parse: an
    /// empty start, logged).
    pub fn restore(saved: Option<&str>) -> Threads {
        let mut t = Threads::default();
        let Some(text) = saved else {
            return t;
        };
        match serde_json::from_str::<Saved>(text) {
            Ok(s) => {
                for (channel, thread, ts) in &s.last {
                    t.last.insert(at(channel, thread), ts.clone());
                }
                for (channel, ts, thread) in &s.posted {
                    t.thread_of.insert(at(channel, ts), thread.clone());
                }
                t.saved = s;
                trim(&mut t.saved.last);
                trim(&mut t.saved.posted);
            }
            Err(e) => {
                tracing::warn!("Slack: the saved thread state does not parse ({e}); starting without it")
            }
        }
        t
    }

    /// Every thread state in the platforms' saved state (each app's,
    /// joined as [`Threads::merge`] does).
    pub fn restore_all(saved: &BTreeMap<String, String>) -> Threads {
        let mut t = Threads::default();
        t.merge_all(saved);
        t
    }

    /// [`Threads::merge`] of every thread state in the platforms' saved
    /// state: what the listeners of every app saved, wherever they ran.
    pub fn merge_all(&mut self, saved: &BTreeMap<String, String>) {
        for (_, state) in saved.iter().filter(|(k, _)| is_state_key(k)) {
            self.merge(Some(state));
        }
    }

    /// Joins what another process saved (the last listener with an app
    /// this one takes over) to what this one knows: posts it did not know
    /// of, and each thread's last answer where the saved one is later.
    /// What does not parse is left out, logged.
    pub fn merge(&mut self, saved: Option<&str>) {
        let other = Threads::restore(saved).saved;
        for (channel, ts, thread) in &other.posted {
            self.note_posted(channel, ts, thread);
        }
        for (channel, thread, ts) in &other.last {
            let newer = self
                .last
                .get(&at(channel, thread))
                .is_none_or(|mine| later(ts, mine));
            if newer {
                self.thread_of.insert(at(channel, ts), thread.clone());
                self.note_last(channel, thread, ts);
            }
        }
        // Trimmed once all is in, by time: entries merged last are not the
        // newest for it (trimmed as they came, a state merged after this
        // process's own pushed its own threads out).
        newest(&mut self.saved.posted, |(c, ts, th)| (ts, c, th));
        newest(&mut self.saved.last, |(c, th, ts)| (ts, c, th));
    }

    /// The state to save, after a change.
    pub fn to_saved(&self) -> String {
        serde_json::to_string(&self.saved).unwrap_or_default()
    }

    /// A message heard in `thread`.
    pub fn heard(&mut self, channel: &str, ts: &str, thread: &str) {
        self.thread_of.insert(at(channel, ts), thread.to_owned());
    }

    /// A persona posted `ts`, in `thread` or at the channel's root;
    /// `answer` unless it is a placeholder. Whether the state to save
    /// changed (only answers change it: a placeholder is saved with the
    /// answer it becomes).
    /// Told twice (the send path, then the listener hearing the post),
    /// nothing changes the second time.
    pub fn posted(&mut self, channel: &str, ts: &str, thread: Option<&str>, answer: bool) -> bool {
        let Some(th) = thread else {
            // Not knowing a message is the same as knowing it is not in a
            // thread: nothing to save.
            return false;
        };
        if !self.note_posted(channel, ts, th) {
            // Known already: at most it became an answer.
            return answer && self.answered(channel, ts);
        }
        trim(&mut self.saved.posted);
        if answer {
            self.set_last(channel, th, ts);
        }
        answer
    }

    /// Notes that `ts` is in `thread`, to save, unless that is known
    /// already; whether it was new. Not trimmed (see [`Threads::merge`]).
    fn note_posted(&mut self, channel: &str, ts: &str, thread: &str) -> bool {
        if self.thread_of.get(&at(channel, ts)).map(String::as_str) == Some(thread) {
            return false;
        }
        self.thread_of.insert(at(channel, ts), thread.to_owned());
        self.saved
            .posted
            .push((channel.to_owned(), ts.to_owned(), thread.to_owned()));
        true
    }

    /// A persona's message now holds an answer (a placeholder edited).
    /// Whether the state to save changed.
    pub fn answered(&mut self, channel: &str, ts: &str) -> bool {
        let Some(thread) = self.thread_of.get(&at(channel, ts)).cloned() else {
            return false;
        };
        if self.last.get(&at(channel, &thread)).map(String::as_str) == Some(ts) {
            return false;
        }
        self.set_last(channel, &thread, ts);
        true
    }

    /// A persona's message is gone: if it was its thread's last, the one
    /// before it is again. Whether the state to save changed.
    pub fn deleted(&mut self, channel: &str, ts: &str) -> bool {
        let Some(thread) = self.thread_of.get(&at(channel, ts)).cloned() else {
            return false;
        };
        let key = at(channel, &thread);
        if self.last.get(&key).map(String::as_str) != Some(ts) {
            return false;
        }
        self.saved
            .last
            .retain(|(c, t, _)| !(c == channel && *t == thread));
        match self.before.remove(&at(channel, ts)) {
            Some(earlier) => {
                self.last.insert(key, earlier.clone());
                self.saved.last.push((channel.to_owned(), thread, earlier));
            }
            None => {
                self.last.remove(&key);
            }
        }
        true
    }

    fn set_last(&mut self, channel: &str, thread: &str, ts: &str) {
        self.note_last(channel, thread, ts);
        trim(&mut self.saved.last);
    }

    /// [`Threads::set_last`] without the trim.
    fn note_last(&mut self, channel: &str, thread: &str, ts: &str) {
        if let Some(earlier) = self.last.get(&at(channel, thread)).cloned() {
            self.before.insert(at(channel, ts), earlier);
        }
        self.last.insert(at(channel, thread), ts.to_owned());
        self.saved.last.retain(|(c, t, _)| !(c == channel && t == thread));
        self.saved
            .last
            .push((channel.to_owned(), thread.to_owned(), ts.to_owned()));
    }

    /// What a message in `thread` replies to: the last persona message
    /// there, else the thread's parent.
    pub fn reply_to(&self, channel: &str, thread: &str) -> String {
        self.last
            .get(&at(channel, thread))
            .cloned()
            .unwrap_or_else(|| thread.to_owned())
    }

    /// The `thread_ts` for a reply to `ts`: its thread's parent when it is
    /// in a thread, else itself (the reply starts a thread under it).
    pub fn thread_for_reply_to(&self, channel: &str, ts: &str) -> String {
        self.thread_of
            .get(&at(channel, ts))
            .cloned()
            .unwrap_or_else(|| ts.to_owned())
    }

    /// Where a later part of a split answer goes: where its first part
    /// went (`None`: the channel, also when that is not known).
    pub fn thread_of_posted(&self, channel: &str, first: &str) -> Option<String> {
        self.thread_of.get(&at(channel, first)).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_the_personas_once_it_answered_there() {
        let mut t = Threads::default();
        // A placeholder is not an answer yet, and nothing to save.
        assert!(!t.posted("C1", "2.0", Some("1.0"), false));
        assert_eq!(t.reply_to("C1", "1.0"), "1.0");
        assert!(t.answered("C1", "2.0"));
        assert!(!t.answered("C1", "2.0"), "no change, nothing to save");
        assert_eq!(t.reply_to("C1", "1.0"), "2.0");
        // A silent turn's placeholder, posted and deleted, never counted.
        assert!(!t.posted("C1", "3.0", Some("1.0"), false));
        assert!(!t.deleted("C1", "3.0"));
        assert_eq!(t.reply_to("C1", "1.0"), "2.0");
        // A later answer that is deleted again: the earlier one counts.
        assert!(t.posted("C1", "4.0", Some("1.0"), true));
        assert_eq!(t.reply_to("C1", "1.0"), "4.0");
        assert!(t.deleted("C1", "4.0"));
        assert_eq!(t.reply_to("C1", "1.0"), "2.0");
        assert!(t.to_saved().contains("\"2.0\""));
        assert!(t.deleted("C1", "2.0"));
        assert_eq!(t.reply_to("C1", "1.0"), "1.0", "the parent, at last");
        assert!(!t.deleted("C1", "9.9"), "not ours");
        // Posts at the channel's root are not saved.
        assert!(!t.posted("C1", "5.0", None, true));
    }

    /// The send path and the listener both tell of one post (in either
    /// order, when processes share a store): told twice, it counts once,
    /// and deleting it gives the thread back to the answer before it.
    #[test]
    fn a_post_told_twice_counts_once() {
        let mut t = Threads::default();
        assert!(t.posted("C1", "2.0", Some("1.0"), true));
        assert!(t.posted("C1", "3.0", Some("1.0"), true));
        assert!(!t.posted("C1", "3.0", Some("1.0"), true), "nothing new");
        assert_eq!(t.reply_to("C1", "1.0"), "3.0");
        assert!(t.deleted("C1", "3.0"));
        assert_eq!(t.reply_to("C1", "1.0"), "2.0", "not itself again");
        // A placeholder heard, then told of as the answer it became.
        assert!(!t.posted("C1", "4.0", Some("1.0"), false));
        assert!(t.posted("C1", "4.0", Some("1.0"), true));
        assert_eq!(t.reply_to("C1", "1.0"), "4.0");
        assert_eq!(
            t.saved.posted.iter().filter(|(_, ts, _)| ts == "3.0").count(),
            1,
            "saved once"
        );
    }

    #[test]
    fn replies_go_to_the_parent_and_later_parts_follow_the_first() {
        let mut t = Threads::default();
        t.heard("C1", "1.5", "1.0");
        assert_eq!(t.thread_for_reply_to("C1", "1.5"), "1.0", "never a reply's ts");
        assert_eq!(t.thread_for_reply_to("C1", "1.0"), "1.0");
        t.posted("C1", "2.0", Some("1.0"), true);
        t.posted("D1", "3.0", None, true);
        assert_eq!(t.thread_of_posted("C1", "2.0").as_deref(), Some("1.0"));
        assert_eq!(t.thread_of_posted("D1", "3.0"), None, "a DM answer in line");
        assert_eq!(t.thread_of_posted("C1", "unknown"), None);
    }

    /// An app taken over from another process: what that process's
    /// listener saved joins what this one knows, the later answer of a
    /// thread winning whichever side had it.
    #[test]
    fn what_the_last_listener_saved_joins_what_is_known() {
        let mut theirs = Threads::default();
        theirs.posted("C1", "2.0", Some("1.0"), true);
        theirs.posted("C1", "9.000002", Some("8.0"), true);
        theirs.posted("C2", "7.0", Some("6.0"), true);
        let mut mine = Threads::default();
        mine.heard("C1", "1.5", "1.0");
        mine.posted("C1", "9.00001", Some("8.0"), true);
        mine.posted("C2", "5.0", Some("6.0"), true);
        mine.merge(Some(&theirs.to_saved()));
        assert_eq!(mine.reply_to("C1", "1.0"), "2.0", "a thread only they knew");
        assert_eq!(mine.reply_to("C1", "8.0"), "9.00001", "mine is later: kept");
        assert_eq!(mine.reply_to("C2", "6.0"), "7.0", "theirs is later: taken");
        assert_eq!(
            mine.thread_for_reply_to("C1", "1.5"),
            "1.0",
            "what it heard stays"
        );
        assert_eq!(mine.thread_of_posted("C2", "7.0").as_deref(), Some("6.0"));
        // Saved from here on, with the rest; merging again changes nothing.
        let saved = mine.to_saved();
        assert!(saved.contains("\"2.0\"") && saved.contains("\"7.0\""), "{saved}");
        mine.merge(Some(&theirs.to_saved()));
        assert_eq!(mine.to_saved(), saved);
        // Nothing saved, or what does not parse, changes nothing.
        mine.merge(None);
        mine.merge(Some("{not json"));
        assert_eq!(mine.to_saved(), saved);
        assert!(later("1700000000.000100", "1700000000.000099"));
        assert!(!later("9.00001", "9.00001"));
    }

    /// Two processes listening with two apps each save under their app's
    /// key; a restart (or a takeover) knows the threads of both, and of
    /// the one key all apps shared before.
    #[test]
    fn every_apps_saved_threads_are_read_back() {
        let mut docs = Threads::default();
        docs.posted("C1", "2.0", Some("1.0"), true);
        let mut chef = Threads::default();
        chef.posted("C9", "6.0", Some("5.0"), true);
        let mut before = Threads::default();
        before.posted("C7", "8.0", Some("7.0"), true);
        let saved: BTreeMap<String, String> = [
            (state_key("docs"), docs.to_saved()),
            (state_key("chef"), chef.to_saved()),
            (STATE_KEY.to_owned(), before.to_saved()),
            // Not thread states: left alone.
            ("slack.threadsX".to_owned(), chef.to_saved().replace("6.0", "6.5")),
            ("telegram:since:docs".to_owned(), "12".to_owned()),
        ]
        .into();
        assert_ne!(state_key("docs"), state_key("chef"));
        let back = Threads::restore_all(&saved);
        assert_eq!(back.reply_to("C1", "1.0"), "2.0", "docs's thread");
        assert_eq!(back.reply_to("C9", "5.0"), "6.0", "chef's thread, not 6.5");
        assert_eq!(back.reply_to("C7", "7.0"), "8.0", "the shared key's");
        let mut taker = Threads::default();
        taker.merge_all(&saved);
        assert_eq!(taker.to_saved(), back.to_saved());
        assert_eq!(
            Threads::restore_all(&BTreeMap::new()).to_saved(),
            Threads::default().to_saved()
        );
    }

    /// A process's own threads, merged with another listener's older ones
    /// (a takeover, a start reading every app's key): the newest by time
    /// are kept, whatever the order of the merges.
    #[test]
    fn merged_states_keep_the_newest_threads_whatever_their_order() {
        let threads = |channel: &str, at: u32| {
            let mut t = Threads::default();
            for i in 0..200 {
                t.posted(
                    channel,
                    &format!("{}.{i:06}", at + 1),
                    Some(&format!("{at}.{i:06}")),
                    true,
                );
            }
            t
        };
        let (older, newer) = (threads("C1", 100), threads("C2", 200));
        let merged = |a: &Threads, b: &Threads| {
            let mut t = Threads::default();
            t.merge(Some(&a.to_saved()));
            t.merge(Some(&b.to_saved()));
            t.to_saved()
        };
        assert_eq!(merged(&older, &newer), merged(&newer, &older));
        let mut mine = threads("C2", 200);
        mine.merge(Some(&older.to_saved()));
        let back = Threads::restore(Some(&mine.to_saved()));
        assert_eq!(back.saved.last.len(), SAVED);
        assert_eq!(
            back.reply_to("C2", "200.000000"),
            "201.000000",
            "its own oldest kept"
        );
        assert_eq!(
            back.reply_to("C1", "100.000199"),
            "101.000199",
            "the newest merged kept"
        );
        assert_eq!(
            back.reply_to("C1", "100.000000"),
            "100.000000",
            "the oldest merged let go"
        );
    }

    #[test]
    fn the_personas_part_survives_a_restart_bounded() {
        let mut t = Threads::default();
        t.posted("C1", "2.0", Some("1.0"), true);
        for i in 0..(SAVED * 2) {
            t.posted("C2", &format!("5.{i}"), Some(&format!("4.{i}")), true);
        }
        let saved = t.to_saved();
        let back = Threads::restore(Some(&saved));
        assert_eq!(back.saved.last.len(), SAVED);
        assert_eq!(back.saved.posted.len(), SAVED);
        let newest = SAVED * 2 - 1;
        assert_eq!(back.reply_to("C2", &format!("4.{newest}")), format!("5.{newest}"));
        assert_eq!(back.reply_to("C1", "1.0"), "1.0", "the oldest were not saved");
        assert_eq!(
            back.thread_for_reply_to("C2", &format!("5.{newest}")),
            format!("4.{newest}")
        );
        // What does not parse is an empty start, not an error.
        assert_eq!(Threads::restore(Some("{not json")).reply_to("C2", "4.1"), "4.1");
    }
}
