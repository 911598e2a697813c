//! Who a message is for: `@handle` mentions, `/command@persona`, replies.
//!
//! Rule 2 of the engine lives here. The text parsers are pure functions over
//! `&str` so they can be fuzzed on their own; [`Targets`] gathers what one
//! message says about its addressees once, and [`Targets::addressing`]
//! answers "is this message for persona P, and why?" for each persona.

use crate::message::{Mentions, Message};
use crate::persona::{PersonaIdx, PersonaSet};

/// Why a message counts as addressed to a persona, in order of precedence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addressed {
    /// A direct conversation with the persona.
    Dm,
    /// The persona is among the mentions.
    Mention,
    /// `/command@persona`.
    Command,
    /// A reply to one of the persona's own messages.
    ReplyToMe,
}

/// Compares two handles or account ids the way chat users expect: case
/// does not matter.
pub fn handle_eq(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        a.eq_ignore_ascii_case(b)
    } else {
        a.chars()
            .flat_map(char::to_lowercase)
            .eq(b.chars().flat_map(char::to_lowercase))
    }
}

fn is_handle_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The `@handle` tokens of a text, without the `@`, for platforms that have
/// no mention entities.
///
/// A mention starts at an `@` that does not follow a word character (so
/// `x@docs.io` and `admin@docs` are not mentions) and runs over letters,
/// digits and `_`, with single `.` or `-` allowed *inside* the handle: in
/// `@docs.` the dot ends the sentence, in `@docs.io` it is part of the
/// handle. Comparing the token to a persona's handle (exactly, ignoring
/// case) then keeps `@docsbot` from waking `docs`.
pub fn text_mentions(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    memchr::memchr_iter(b'@', bytes).filter_map(move |at| {
        if let Some(prev) = text[..at].chars().next_back()
            && is_handle_char(prev)
        {
            return None;
        }
        let rest = &text[at + 1..];
        let len = handle_len(rest);
        (len > 0).then(|| &rest[..len])
    })
}

/// Handles that speak to the whole room, not to someone else in it
/// (`@everyone`, `@here`, `@all`, `@channel`, `@room`): a message with one
/// is not "addressed to another", wherever it is read from the text (the
/// web room, IRC, a replay), unless a persona is called so.
pub fn room_wide(handle: &str) -> bool {
    ["everyone", "here", "all", "channel", "room"]
        .iter()
        .any(|w| w.eq_ignore_ascii_case(handle))
}

/// Length in bytes of the handle at the start of `s` (0 when there is none).
fn handle_len(s: &str) -> usize {
    let mut end = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if is_handle_char(c) {
            end = i + c.len_utf8();
        } else if (c == '.' || c == '-') && end == i && end > 0 {
            // A separator counts only between two handle characters.
            match chars.peek() {
                Some(&(_, n)) if is_handle_char(n) => {}
                _ => break,
            }
        } else {
            break;
        }
    }
    end
}

/// A leading `/command`, optionally aimed at one bot with `@handle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Command<'a> {
    /// The command word without the slash.
    pub name: &'a str,
    /// The `@handle` it is aimed at, if any.
    pub target: Option<&'a str>,
}

/// Parses `/command` or `/command@handle` at the start of a message (after
/// leading whitespace), followed by the end of the text or whitespace.
pub fn parse_command(text: &str) -> Option<Command<'_>> {
    let rest = text.trim_start().strip_prefix('/')?;
    let name_len = rest
        .char_indices()
        .find(|&(_, c)| !is_handle_char(c))
        .map_or(rest.len(), |(i, _)| i);
    if name_len == 0 {
        return None;
    }
    let (name, after) = rest.split_at(name_len);
    let (target, after) = match after.strip_prefix('@') {
        Some(t) => {
            let len = handle_len(t);
            if len == 0 {
                return None;
            }
            (Some(&t[..len]), &t[len..])
        }
        None => (None, after),
    };
    match after.chars().next() {
        None => Some(Command { name, target }),
        Some(c) if c.is_whitespace() => Some(Command { name, target }),
        _ => None,
    }
}

/// What a handle names, as far as the engine knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handle {
    /// A persona hosted here.
    Persona(PersonaIdx),
    /// A bot account seen in the room that is not hosted here.
    Bot,
    /// Anyone else (usually a human).
    Other,
}

/// Where `/command@handle` points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandTarget {
    /// At a persona hosted here.
    Persona(PersonaIdx),
    /// At an account that is not one of ours.
    Elsewhere,
    /// At no one in particular (`/reset` without `@handle`): every persona
    /// in command mode takes it, as a chat's bots all see a bare command.
    /// It addresses nobody in the other modes.
    Bare,
}

/// What one message says about its addressees, computed once per message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Targets {
    /// Personas it mentions.
    pub personas: PersonaSet,
    /// Whether it mentions a bot that is not hosted here.
    pub mentions_bot: bool,
    /// Whether it mentions someone who is neither a persona nor a known bot.
    pub mentions_other: bool,
    /// Where its leading `/command@handle` points, if it has one.
    pub command: Option<CommandTarget>,
}

impl Targets {
    /// Classifies the mentions and command of `msg` with `lookup`, which
    /// tells what a handle or account id names.
    pub fn of(msg: &Message, lookup: impl Fn(&str) -> Handle) -> Targets {
        let mut t = Targets::default();
        let mut note = |h: Handle| match h {
            Handle::Persona(p) => t.personas.insert(p),
            Handle::Bot => t.mentions_bot = true,
            Handle::Other => t.mentions_other = true,
        };
        match &msg.mentions {
            Mentions::Explicit(ids) => ids.iter().for_each(|id| note(lookup(id.as_str()))),
            Mentions::FromText => text_mentions(&msg.text).for_each(|h| match lookup(h) {
                Handle::Other if room_wide(h) => {}
                named => note(named),
            }),
        }
        if let Some(cmd) = parse_command(&msg.text) {
            t.command = Some(match cmd.target.map(&lookup) {
                None => CommandTarget::Bare,
                Some(Handle::Persona(p)) => CommandTarget::Persona(p),
                Some(Handle::Bot | Handle::Other) => CommandTarget::Elsewhere,
            });
        }
        t
    }

    /// Whether the message names any persona or bot explicitly (by mention
    /// or by `/command@`). When it does, only those named are addressed: a
    /// reply to persona P's message that mentions Q wakes Q, not P.
    pub fn names_a_bot(&self) -> bool {
        !self.personas.is_empty()
            || self.mentions_bot
            || matches!(
                self.command,
                Some(CommandTarget::Persona(_) | CommandTarget::Elsewhere)
            )
    }

    /// Whether the message explicitly names someone other than `p`.
    pub fn names_other_than(&self, p: PersonaIdx) -> bool {
        self.personas.has_other_than(p)
            || self.mentions_bot
            || self.mentions_other
            || matches!(self.command, Some(CommandTarget::Persona(q)) if q != p)
            || matches!(self.command, Some(CommandTarget::Elsewhere))
    }

    /// Why the message is addressed to persona `p`, if it is.
    ///
    /// `dm_for_p` says whether the message is a DM with `p`;
    /// `replies_to_p` whether it replies to one of `p`'s own messages.
    pub fn addressing(&self, p: PersonaIdx, dm_for_p: bool, replies_to_p: bool) -> Option<Addressed> {
        if dm_for_p {
            Some(Addressed::Dm)
        } else if self.personas.contains(p) {
            Some(Addressed::Mention)
        } else if self.command == Some(CommandTarget::Persona(p)) {
            Some(Addressed::Command)
        } else if replies_to_p && !self.names_a_bot() {
            Some(Addressed::ReplyToMe)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mentions(text: &str) -> Vec<&str> {
        text_mentions(text).collect()
    }

    #[test]
    fn mentions_need_word_boundaries() {
        assert_eq!(mentions("@docs, how do I reset?"), ["docs"]);
        assert_eq!(mentions("ask @docs."), ["docs"]);
        assert_eq!(mentions("(@docs) and @chef!"), ["docs", "chef"]);
        assert_eq!(mentions("@docsbot hi"), ["docsbot"]);
        assert_eq!(mentions("mail x@docs.io or admin@docs"), Vec::<&str>::new());
        assert_eq!(mentions("see @docs.io"), ["docs.io"]);
        assert_eq!(mentions("@ alone and @@docs"), ["docs"]);
        assert_eq!(mentions("hi @jean-luc-"), ["jean-luc"]);
        assert_eq!(mentions("héllo@docs but é @docs"), ["docs"]);
    }

    #[test]
    fn handles_compare_without_case() {
        assert!(handle_eq("Docs", "docs"));
        assert!(handle_eq("ÉCOLE", "école"));
        assert!(!handle_eq("docs", "docsbot"));
    }

    #[test]
    fn commands_parse_with_and_without_target() {
        assert_eq!(
            parse_command("/reset@docs now"),
            Some(Command {
                name: "reset",
                target: Some("docs")
            })
        );
        assert_eq!(
            parse_command("  /help"),
            Some(Command {
                name: "help",
                target: None
            })
        );
        assert_eq!(parse_command("/help@"), None);
        assert_eq!(parse_command("/help@docs!"), None);
        assert_eq!(parse_command("path /etc/passwd"), None);
        assert_eq!(parse_command("/"), None);
        assert_eq!(parse_command("/usr/bin"), None);
    }
}
