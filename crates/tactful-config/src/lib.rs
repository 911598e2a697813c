//! What every part of tactful's config file needs, whoever owns the part:
//! errors that name the file, line and column with the line shown (secret
//! values on it masked), `${ENV}` expansion while reading, and the check
//! helper that turns a span into such an error.
//!
//! The binary owns the file; each platform crate will own its own section
//! (`[platforms.<name>]`, `persona.<name>`) and validate it with these same
//! tools, so `tactful check` reads the same for every part of the file.

pub mod account;

use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer};
pub use toml::Spanned;
pub use toml::de::DeValue;

/// A section of the file cut out for its owner (a platform's table, a
/// persona's sub-table for that platform), spans still pointing into the
/// whole file.
pub type Section<'i> = Spanned<DeValue<'i>>;

/// One persona as a platform sees it while reading the config: where it is
/// in `[[persona]]`, its id, and its sub-table for that platform, if any.
#[derive(Debug)]
pub struct PersonaPart<'i> {
    /// Its index among `[[persona]]` tables (for `persona[i]` in errors).
    pub index: usize,
    /// Its id, `${ENV}` already expanded, and the id's span.
    pub id: Spanned<String>,
    /// `persona.<platform> = { ... }`, when set.
    pub section: Option<Section<'i>>,
}

/// Reads `section` as its owner's type. Errors name the line, as every
/// config error does, and unknown keys are errors where `T` denies them.
/// Call it inside [`with_env`] so `${ENV}` strings expand.
pub fn read<T: DeserializeOwned>(section: Section<'_>, check: &Checker<'_>) -> Result<T, ConfigError> {
    T::deserialize(toml::de::ValueDeserializer::from(section)).map_err(|e| {
        let message = match UnknownKey::parse(e.message()) {
            Some(u) => u.message(&u.expected.iter().map(String::as_str).collect::<Vec<_>>()),
            None => e.message().to_owned(),
        };
        match e.span() {
            Some(span) => check.at(span, message),
            None => check.nowhere(message),
        }
    })
}

/// An unknown key, as serde reports it: "unknown field `mod`, expected one
/// of `mode`, `floor`" (or "expected `a` or `b`", or "there are no
/// fields").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownKey {
    /// `field` for a key, `variant` for a value that must be one of a
    /// list (`mode = "shout"`), as serde says it.
    pub what: String,
    /// The key (or value) written.
    pub key: String,
    /// The keys serde knows there.
    pub expected: Vec<String>,
}

impl UnknownKey {
    /// The unknown key serde's `message` is about, if it is about one.
    pub fn parse(message: &str) -> Option<UnknownKey> {
        let (what, rest) = [("field", "unknown field `"), ("variant", "unknown variant `")]
            .into_iter()
            .find_map(|(what, prefix)| message.strip_prefix(prefix).map(|rest| (what, rest)))?;
        let (key, rest) = rest.split_once('`')?;
        let expected = rest.split('`').skip(1).step_by(2).map(str::to_owned).collect();
        Some(UnknownKey {
            what: what.to_owned(),
            key: key.to_owned(),
            expected,
        })
    }

    /// The error to show: the keys `valid` there (which may be more than
    /// serde knew, when other code reads part of the table, or fewer, when
    /// a table's keys depend on its kind), and "did you mean" for a near
    /// miss.
    pub fn message(&self, valid: &[&str]) -> String {
        let quoted: Vec<String> = valid.iter().map(|k| format!("`{k}`")).collect();
        let list = match quoted.as_slice() {
            [] => "no keys here".to_owned(),
            [one] => format!("expected {one}"),
            many => format!("expected one of {}", many.join(", ")),
        };
        let hint = did_you_mean(&self.key, valid.iter().copied())
            .map(|k| format!(" (did you mean `{k}`?)"))
            .unwrap_or_default();
        format!("unknown {} `{}`, {list}{hint}", self.what, self.key)
    }
}

/// The valid key `key` most likely means: the nearest by edit distance
/// (a swap counts as one edit), within two edits and under half its
/// length, or one that only differs by a plural `s` or case.
pub fn did_you_mean<'a>(key: &str, valid: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let key = key.to_ascii_lowercase();
    valid
        .into_iter()
        .map(|v| (strsim::damerau_levenshtein(&key, &v.to_ascii_lowercase()), v))
        .filter(|(d, v)| *d <= 2 && *d * 2 < v.chars().count().max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, v)| v)
}

/// A config that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file, as given.
    pub path: PathBuf,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// What is wrong, naming the key.
    pub message: String,
    /// The offending source line, for context.
    pub snippet: Option<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        write!(f, ": {}", self.message)?;
        if let (Some((line, col)), Some(snippet)) = (self.position, &self.snippet) {
            let gutter = line.to_string().len();
            write!(
                f,
                "\n{:gutter$} |\n{line} | {snippet}\n{:gutter$} | {:>col$}",
                "", "", "^"
            )?;
        }
        Ok(())
    }
}

/// Where a span starts, as 1-based line and column, plus the line's text.
pub fn locate(src: &str, offset: usize) -> ((usize, usize), String) {
    let offset = offset.min(src.len());
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = src[line_start..offset].chars().count() + 1;
    let text = src[line_start..].lines().next().unwrap_or("").to_owned();
    ((line, col), text)
}

/// What a masked secret value looks like in `tactful check` output.
pub const SECRET_SHOWN: &str = "\"***\"";

/// Whether a key names a secret, or nearly does: a misspelt `pasword` or
/// `tokn` is an unknown key the error quotes, and its value is most likely
/// the secret all the same.
fn secret_like(key: &str) -> bool {
    if tactful_core::secrets::is_secret_name(key) {
        return true;
    }
    let lower = key.to_ascii_lowercase();
    // Holds a secret word yet is not a secret: one of tactful's own
    // settings (`max_tokens`, `silence_token`).
    if tactful_core::secrets::SECRET_WORDS
        .iter()
        .any(|w| lower.contains(w))
    {
        return false;
    }
    let key: Vec<char> = lower.chars().collect();
    tactful_core::secrets::SECRET_WORDS
        .iter()
        .filter(|w| w.len() >= 5)
        .any(|w| {
            let w: Vec<char> = w.chars().collect();
            (w.len() - 1..=w.len() + 1).any(|n| key.windows(n).any(|window| within_one_edit(window, &w)))
        })
}

/// Whether `a` becomes `b` with at most one insertion, deletion or change.
fn within_one_edit(a: &[char], b: &[char]) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if long.len() - short.len() > 1 {
        return false;
    }
    let same_start = short.iter().zip(long).take_while(|(x, y)| x == y).count();
    if short.len() == long.len() {
        short[same_start + 1.min(short.len() - same_start)..]
            == long[same_start + 1.min(long.len() - same_start)..]
    } else {
        short[same_start..] == long[same_start + 1..]
    }
}

/// A config line with the values of secret keys masked.
pub struct Masked {
    /// The line, masked.
    pub line: String,
    /// The column the caret points at, moved with the text.
    pub col: usize,
    /// The values taken out (raw, and unquoted when quoted), to take out of
    /// the error message too.
    pub values: Vec<String>,
}

/// Masks `key = value` pairs on one config line whose key names a secret
/// (see [`tactful_core::secrets::is_secret_name`]), inline tables included:
/// `matrix = { user_id = "@a:b", password = "hunter2" }`.
pub fn mask_secrets(line: &str, col: usize) -> Masked {
    static PAIR: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
        Regex::new(r#""?([A-Za-z0-9_-]+)"?\s*=\s*("(?:[^"\\]|\\.)*"?|'[^']*'?|[^\s,}\]#]+)"#)
            .expect("a valid pattern")
    });
    // Every secret pair, overlapping ones too: in a malformed line a quoted
    // value can swallow the key of the next pair (`a_secret = "x = "pw"`),
    // so a search that resumed after each match would miss the second.
    let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
    let mut from = 0;
    while let Some(c) = PAIR.captures_at(line, from) {
        let (Some(all), Some(key), Some(value)) = (c.get(0), c.get(1), c.get(2)) else {
            break;
        };
        // A whole key only: `tokens` inside `max_tokens` is no key.
        let whole = line[..all.start()]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        if whole && secret_like(key.as_str()) {
            ranges.push(value.range());
        }
        from = all.start() + line[all.start()..].chars().next().map_or(1, char::len_utf8);
    }
    // A password inside any address, whatever its key (`store.url`, a
    // `base_url` with credentials): `scheme://user:PASSWORD@` or
    // `?password=`.
    static URL_PASSWORD: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
        Regex::new(r#"[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s"'?#]*:([^@/\s"']+)@|[?&]password=([^&\s"'#]+)"#)
            .expect("a valid pattern")
    });
    for c in URL_PASSWORD.captures_iter(line) {
        ranges.extend(c.get(1).or(c.get(2)).map(|m| m.range()));
    }
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<usize>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(m) if r.start <= m.end => m.end = m.end.max(r.end),
            _ => merged.push(r),
        }
    }
    let mut out = String::with_capacity(line.len());
    let mut values = Vec::new();
    let mut shift: isize = 0;
    let mut inside = None;
    let mut last = 0;
    for value in merged {
        let raw = &line[value.clone()];
        values.push(raw.to_owned());
        let unquoted = raw.trim_matches(|c| c == '"' || c == '\'');
        if unquoted.chars().count() >= 3 {
            values.push(unquoted.to_owned());
        }
        out.push_str(&line[last..value.start]);
        out.push_str(SECRET_SHOWN);
        last = value.end;
        // Columns are 1-based characters.
        let start = line[..value.start].chars().count() + 1;
        let len = raw.chars().count();
        if col >= start + len {
            shift += SECRET_SHOWN.chars().count() as isize - len as isize;
        } else if col > start {
            inside = Some(start as isize + shift);
        }
    }
    let new_col = inside.unwrap_or(col as isize + shift).max(1) as usize;
    out.push_str(&line[last..]);
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    Masked {
        line: out,
        col: new_col,
        values,
    }
}

/// Looks a variable up.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The values of the variables a config text refers to.
pub type EnvValues = std::collections::HashMap<String, String>;

thread_local! {
    /// Set only while [`with_env`] runs, so the serde `Deserialize`
    /// impl of [`EnvString`] (which takes no context) can see them.
    static ENV: RefCell<Option<EnvValues>> = const { RefCell::new(None) };
}

/// Replaces `${NAME}` with the variable's value and `$${` with `${`.
pub fn expand_env(s: &str, env: EnvLookup<'_>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(lit) = after.strip_prefix("${") {
            out.push_str("${");
            rest = lit;
        } else if let Some(name_start) = after.strip_prefix('{') {
            let Some(end) = name_start.find('}') else {
                return Err("`${` is not closed; write `$${` for a literal `${`".to_owned());
            };
            let name = &name_start[..end];
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(format!(
                    "`${{{name}}}` is not a valid environment variable reference"
                ));
            }
            match env(name) {
                Some(v) => out.push_str(&v),
                None => return Err(format!("environment variable `{name}` is not set")),
            }
            rest = &name_start[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A string with `${ENV}` references expanded while it is read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvString(pub String);

impl<'de> Deserialize<'de> for EnvString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        if !raw.contains('$') {
            return Ok(EnvString(raw));
        }
        ENV.with(|env| {
            let env = env.borrow();
            let lookup = |k: &str| match env.as_ref() {
                Some(values) => values.get(k).cloned(),
                None => std::env::var(k).ok(),
            };
            expand_env(&raw, &lookup)
                .map(EnvString)
                .map_err(de::Error::custom)
        })
    }
}

/// Runs `read` (a deserialisation) with `values` as the environment the
/// [`EnvString`]s in it see; outside, they read the process environment.
pub fn with_env<T>(values: EnvValues, read: impl FnOnce() -> T) -> T {
    ENV.with(|e| *e.borrow_mut() = Some(values));
    let out = read();
    ENV.with(|e| *e.borrow_mut() = None);
    out
}

/// The variable names a config text refers to as `${NAME}`.
pub fn referenced_vars(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find("${") {
        let after = &rest[i + 2..];
        if let Some(end) = after.find('}') {
            out.push(after[..end].to_owned());
            rest = &after[end..];
        } else {
            break;
        }
    }
    out
}

/// Turns spans of one config file into errors naming its lines.
pub struct Checker<'a> {
    /// The file's text.
    pub src: &'a str,
    /// The file, as given.
    pub path: &'a Path,
}

impl Checker<'_> {
    /// An error at `span` (byte offsets into the file), with its line
    /// shown and secret values on it masked.
    pub fn at(&self, span: std::ops::Range<usize>, message: impl Into<String>) -> ConfigError {
        let ((line, col), snippet) = locate(self.src, span.start);
        // The line is shown for context: a literal secret on it must not be.
        let masked = mask_secrets(&snippet, col);
        let mut message = message.into();
        for value in &masked.values {
            message = message.replace(value.as_str(), SECRET_SHOWN);
        }
        ConfigError {
            path: self.path.to_owned(),
            position: Some((line, masked.col)),
            message,
            snippet: Some(masked.line),
        }
    }

    /// An error about the file as a whole.
    pub fn nowhere(&self, message: impl Into<String>) -> ConfigError {
        ConfigError {
            path: self.path.to_owned(),
            position: None,
            message: message.into(),
            snippet: None,
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_unknown_key_gets_a_near_miss_and_the_keys_valid_there() {
        let u = UnknownKey::parse("unknown field `mod`, expected one of `mode`, `floor`, `model`")
            .expect("parsed");
        assert_eq!(u.key, "mod");
        assert_eq!(u.expected, ["mode", "floor", "model"]);
        assert_eq!(
            u.message(&["mode", "floor"]),
            "unknown field `mod`, expected one of `mode`, `floor` (did you mean `mode`?)"
        );
        assert_eq!(
            UnknownKey::parse("unknown field `x`, expected `a` or `b`").map(|u| u.expected),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(
            UnknownKey::parse("unknown field `x`, there are no fields").map(|u| u.message(&[])),
            Some("unknown field `x`, no keys here".to_owned())
        );
        assert_eq!(UnknownKey::parse("invalid type: string"), None);
        let v = UnknownKey::parse("unknown variant `mentoin`, expected one of `mention`, `all`")
            .expect("a variant");
        assert_eq!(
            v.message(&["mention", "all"]),
            "unknown variant `mentoin`, expected one of `mention`, `all` (did you mean `mention`?)"
        );
    }

    #[test]
    fn did_you_mean_finds_near_misses_only() {
        let keys = ["mode", "rate_limit", "max_bot_turns", "tokens", "ignore_bots"];
        assert_eq!(did_you_mean("mdoe", keys), Some("mode"));
        assert_eq!(did_you_mean("ratelimit", keys), Some("rate_limit"));
        assert_eq!(did_you_mean("token", keys), Some("tokens"));
        assert_eq!(did_you_mean("Ignore_Bots", keys), Some("ignore_bots"));
        assert_eq!(did_you_mean("colour", keys), None);
        assert_eq!(did_you_mean("xy", keys), None);
    }

    use super::*;

    /// Found by the config fuzz target: a malformed pair before a secret
    /// one (`0=auth_token = "..."`) used to be matched as the pair, so the
    /// token itself went out unmasked.
    #[test]
    fn a_misspelt_secret_key_is_masked_too() {
        for line in [
            r#"pasword = "s3cr3t-value""#,
            r#"m = { user_id = "@a:b", passwrd = "s3cr3t-value" }"#,
            r#"tokn = "s3cr3t-value""#,
        ] {
            let masked = mask_secrets(line, 1);
            assert!(!masked.line.contains("s3cr3t-value"), "{line} -> {}", masked.line);
        }
        for plain in [
            r#"model = "gpt-4o""#,
            r#"user_id = "@a:b""#,
            r#"history = 50"#,
            r#"max_tokens = 600"#,
            r#"silence_token = "NO_REPLY""#,
        ] {
            assert_eq!(mask_secrets(plain, 1).line, plain);
        }
        for line in [
            r#"url = "postgres://tactful:s3cr3t-value@db/chat""#,
            r#"url = "postgres://db/chat?user=me&password=s3cr3t-value""#,
            r#"base_url = "https://me:s3cr3t-value@llm.internal/v1""#,
        ] {
            let masked = mask_secrets(line, 7);
            assert!(!masked.line.contains("s3cr3t-value"), "{line} -> {}", masked.line);
            assert!(masked.values.iter().any(|v| v == "s3cr3t-value"), "{line}");
        }
    }

    #[test]
    fn a_pair_before_a_secret_does_not_hide_it_from_the_mask() {
        for line in [
            r#"0=auth_token = "s3cr3t-value""#,
            // Found by the fuzzer: a quoted value swallowing the next key.
            r#"m = { a_secret_id = "@x user_password = "s3cr3t-value","#,
            r#"x = 1, password = "s3cr3t-value""#,
            r#"m = { user = "u", "api_key" = 's3cr3t-value' }"#,
        ] {
            let masked = mask_secrets(line, 1);
            assert!(!masked.line.contains("s3cr3t-value"), "{line} -> {}", masked.line);
            assert!(masked.line.contains("***"), "{}", masked.line);
        }
        let plain = mask_secrets(r#"model = "gpt-4o""#, 1);
        assert!(plain.line.contains("gpt-4o"), "{}", plain.line);
    }
}
