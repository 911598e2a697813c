//! A platform's saved cursors (the last message each account handed in),
//! as the store holds them: read when the platform is built, and read
//! again when the accounts a process holds change, so an account taken
//! over from another process starts from what that process saved, not
//! from what the store held when this one started (which would hand the
//! messages since in again).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The saved state under one prefix (`zulip:last:`), kept current.
#[derive(Debug)]
pub struct SavedCursors {
    prefix: &'static str,
    entries: Mutex<BTreeMap<String, String>>,
}

impl SavedCursors {
    /// The entries of `saved` under `prefix`.
    pub fn new(prefix: &'static str, saved: &BTreeMap<String, String>) -> SavedCursors {
        let cursors = SavedCursors {
            prefix,
            entries: Mutex::new(BTreeMap::new()),
        };
        cursors.refresh(saved);
        cursors
    }

    /// Takes the entries under the prefix from `saved`, the store's state
    /// now (what another process saved since is newer than what was read
    /// at start).
    pub fn refresh(&self, saved: &BTreeMap<String, String>) {
        if let Ok(mut entries) = self.entries.lock() {
            for (k, v) in saved.range(self.prefix.to_owned()..) {
                if !k.starts_with(self.prefix) {
                    break;
                }
                entries.insert(k.clone(), v.clone());
            }
        }
    }

    /// The value saved under `key` (prefix included), read as a number.
    pub fn number(&self, key: &str) -> Option<u64> {
        self.entries.lock().ok()?.get(key)?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_taken_over_starts_from_what_was_saved_since() {
        let at_start: BTreeMap<String, String> = [
            ("zulip:last:10".to_owned(), "500".to_owned()),
            ("other:x".to_owned(), "1".to_owned()),
            ("zulipx:last:10".to_owned(), "9".to_owned()),
        ]
        .into();
        let cursors = SavedCursors::new("zulip:last:", &at_start);
        assert_eq!(cursors.number("zulip:last:10"), Some(500));
        assert_eq!(cursors.number("other:x"), None, "another prefix is not kept");
        let later: BTreeMap<String, String> = [("zulip:last:10".to_owned(), "740".to_owned())].into();
        cursors.refresh(&later);
        assert_eq!(cursors.number("zulip:last:10"), Some(740));
    }
}
