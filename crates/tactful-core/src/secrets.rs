//! Keeping secrets out of everything tactful writes down.
//!
//! API keys, bot tokens and passwords reach tactful through its config; they
//! must never reach a log line, an error, a trace or `tactful check` output,
//! even when a server echoes them back in an error body (a homeserver
//! quoting the login request, an IRC library tracing the `IDENTIFY` line it
//! sent). Checking every call site cannot promise that, so there is one
//! helper, [`redact`], that every logged or traced error text passes
//! through: the binary registers the config's secrets once
//! ([`register`]), its log writer redacts each line, and agent and platform
//! errors are redacted where they are made.
//!
//! A secret is also matched in the forms a server is likely to echo it in:
//! JSON-escaped and percent-encoded.

use std::borrow::Cow;
use std::sync::RwLock;

/// What a secret is replaced with.
pub const MASK: &str = "[redacted]";

/// Secrets shorter than this are not registered: masking every `abc` in
/// the logs would hide more than it protects (and such a secret protects
/// little).
pub const MIN_SECRET_CHARS: usize = 4;

static SECRETS: RwLock<Vec<Box<str>>> = RwLock::new(Vec::new());

/// Remembers `secret` (and the forms a server may echo it in) so
/// [`redact`] masks it from then on. Blank and very short values are
/// ignored.
pub fn register(secret: &str) {
    let secret = secret.trim();
    if secret.chars().count() < MIN_SECRET_CHARS {
        return;
    }
    let Ok(mut all) = SECRETS.write() else {
        return;
    };
    for form in forms(secret) {
        if !all.iter().any(|s| **s == *form) {
            all.push(form.into_boxed_str());
        }
    }
    // Longest first, so a secret containing another is masked whole.
    all.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `text` with every registered secret replaced by [`MASK`]. Borrowed
/// (free) when there is nothing to mask.
pub fn redact(text: &str) -> Cow<'_, str> {
    match SECRETS.read() {
        Ok(all) => redact_with(text, &all),
        // A poisoned lock means a panic mid-registration; masking nothing
        // would be the wrong way to fail.
        Err(_) => Cow::Owned(MASK.to_owned()),
    }
}

/// `text` on one line: every control character (a line break, a carriage
/// return, an escape sequence's start) and line or paragraph separator
/// shown as a space, so text from outside (a server's error, a message in
/// a trace) cannot start a forged line of a log or a text trace.
pub fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// [`redact`], then cut to `max` characters (with `…` when cut): a
/// server's text in an error, at a loggable size. Masked before it is
/// cut, since a token cut in half would no longer be recognised.
pub fn redact_clipped(text: &str, max: usize) -> String {
    let text = redact(text);
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.into_owned(),
    }
}

/// [`redact`] against an explicit list (forms already expanded).
pub fn redact_with<'a, S: AsRef<str>>(text: &'a str, secrets: &[S]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for s in secrets {
        let s = s.as_ref();
        if !s.is_empty() && out.contains(s) {
            out = Cow::Owned(out.replace(s, MASK));
        }
    }
    out
}

/// The secret as written, JSON-escaped and percent-encoded (each only when
/// it differs).
fn forms(secret: &str) -> Vec<String> {
    let mut v = vec![secret.to_owned()];
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json.trim_matches('"');
    if json != secret {
        v.push(json.to_owned());
    }
    let pct = percent_encode(secret);
    if pct != secret {
        v.push(pct);
    }
    v
}

/// Percent-encoding of everything but unreserved URL characters.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether a config key or variable name holds a secret by its name
/// (`api_key`, `auth_token`, `password`, `OPENAI_API_KEY`,
/// `Authorization`...): its value is masked in error output and registered.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| n.contains(w)) && !NOT_SECRET.contains(&n.as_str())
}

/// tactful's own settings whose names contain a secret word but whose
/// values are not secret: masking `silence_token = "NO_REPLY"` would also
/// redact every `NO_REPLY` from the logs.
const NOT_SECRET: &[&str] = &["silence_token", "max_tokens", "max_completion_tokens", "tokens"];

/// The words that make a name secret-valued, for code that has to find such
/// names in text (`tactful check` masks `key = value` pairs with them).
pub const SECRET_WORDS: &[&str] = &[
    "key",
    "token",
    "password",
    "passwd",
    "secret",
    "credential",
    "auth",
    "cookie",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_echoed_form_is_masked() {
        let secrets = forms("p@ss \"w0rd\"");
        for text in [
            r#"login failed for {"password":"p@ss \"w0rd\""}"#,
            "GET /login?password=p%40ss%20%22w0rd%22",
            "raw p@ss \"w0rd\" here",
        ] {
            let r = redact_with(text, &secrets);
            assert!(r.contains(MASK), "{r}");
            assert!(!r.contains("w0rd"), "{r}");
        }
        assert!(matches!(redact_with("nothing", &secrets), Cow::Borrowed(_)));
    }

    #[test]
    fn the_registry_masks_what_was_registered_and_skips_trivia() {
        register("sk-registry-test-9f8e7d");
        register("ab");
        assert_eq!(redact("key sk-registry-test-9f8e7d!"), format!("key {MASK}!"));
        assert_eq!(redact("ab stays"), "ab stays");
    }

    #[test]
    fn secret_names() {
        for n in [
            "api_key",
            "auth_token",
            "password",
            "OPENAI_API_KEY",
            "Authorization",
            "bot_token",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["model", "listen", "user_id", "nick", "history"] {
            assert!(!is_secret_name(n), "{n}");
        }
    }
}
