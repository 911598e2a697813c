//! One persona's verdict on one message ([`decide`]): own message, DM
//! routing, mode, bot rules, allowlist and rate limit, in that order.

#[allow(clippy::wildcard_imports)]
use super::*;

/// Who the message being decided replies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReplyAuthor {
    Persona(PersonaIdx),
    Bot,
    Human,
}

/// What to do about a message for one persona.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// Only the decision.
    None,
    /// Start a reply turn now.
    Turn,
    /// Ask the reply-decision gate first; the decision waits for it.
    Gate,
    /// Put it in the persona's ambient buffer.
    Buffer,
    /// Send the spend budget's notice (an addressed message the persona
    /// cannot pay to answer).
    Notice,
}

/// One persona's verdict on one message.
#[derive(Clone, Copy, Debug)]
pub(super) struct Verdict {
    pub(super) outcome: Outcome,
    pub(super) reason: Reason,
    pub(super) action: Action,
    /// Whether a rate-limit slot was reserved.
    pub(super) reserved: bool,
    /// Whether a slot of the room's unprompted budget was reserved.
    pub(super) unprompted: bool,
}

impl Verdict {
    pub(super) fn new(outcome: Outcome, reason: Reason) -> Verdict {
        Verdict {
            outcome,
            reason,
            action: Action::None,
            reserved: false,
            unprompted: false,
        }
    }
}

/// What the engine established about a message before deciding for each
/// persona.
pub(super) struct Facts<'a> {
    pub(super) now: Timestamp,
    pub(super) msg: &'a Message,
    pub(super) author: Option<PersonaIdx>,
    pub(super) is_bot: bool,
    pub(super) reply_author: Option<ReplyAuthor>,
    pub(super) targets: Targets,
}

/// Decides what persona `p` does with a message: own message, DM routing,
/// mode, bot rules, allowlist, rate limit, in that order. A turn's
/// rate-limit slot is reserved here, before any agent (or gate) is called.
pub(super) fn decide(spec: &PersonaSpec, p: PersonaIdx, room: &mut Room, f: &Facts<'_>) -> Verdict {
    if f.author == Some(p) {
        return Verdict::new(Outcome::Record, Reason::OwnMessage);
    }
    let msg = f.msg;
    let dm_for_p = msg.is_dm && msg.dm_to.as_ref().is_none_or(|to| spec.answers_to(to.as_str()));
    if msg.is_dm && !dm_for_p {
        return Verdict::new(Outcome::Skip, Reason::DmForOther);
    }
    let policy = &room.policies[p.0 as usize];
    let replies_to_p = f.reply_author == Some(ReplyAuthor::Persona(p));
    let addressed = f.targets.addressing(p, dm_for_p, replies_to_p);
    if policy.mode == Mode::Observe {
        return Verdict::new(Outcome::Record, Reason::Observe);
    }
    if f.is_bot && policy.ignore_bots {
        return Verdict::new(Outcome::Record, Reason::BotAuthor);
    }
    let names_other = || {
        f.targets.names_other_than(p)
            || matches!(f.reply_author, Some(ReplyAuthor::Bot | ReplyAuthor::Persona(_)))
    };
    let reason = match (policy.mode, addressed) {
        (Mode::Command, Some(a @ (Addressed::Dm | Addressed::Command))) => Reason::from(a),
        (Mode::Command, _) if f.targets.command == Some(CommandTarget::Bare) => Reason::Command,
        (Mode::Command, _) => return Verdict::new(Outcome::Record, Reason::NotCommand),
        (_, Some(a)) => Reason::from(a),
        (Mode::Mention, None) => return Verdict::new(Outcome::Record, Reason::NotAddressed),
        (Mode::All | Mode::Ambient, None) if names_other() => {
            return Verdict::new(Outcome::Record, Reason::AddressedToOther);
        }
        (Mode::All, None) => Reason::All,
        (Mode::Ambient, None) => Reason::Buffered,
        (Mode::Observe, None) => unreachable!("observe returned above"),
    };
    // Small talk nobody needs answered costs no call (`small_talk.rs`).
    if reason == Reason::All
        && policy.pre_gate.enabled
        && crate::small_talk::is_small_talk(&msg.text, &policy.pre_gate.phrases, policy.pre_gate.max_chars)
    {
        return Verdict::new(Outcome::Record, Reason::PreGate);
    }
    if f.is_bot && room.bot_streak >= policy.max_bot_turns {
        return Verdict::new(Outcome::Skip, Reason::BotTurnLimit);
    }
    if !policy.allows(msg.sender.id.as_str(), msg.sender.handle.as_deref()) {
        return Verdict::new(Outcome::Skip, Reason::NotAllowed);
    }
    if reason == Reason::Buffered {
        return Verdict {
            action: Action::Buffer,
            ..Verdict::new(Outcome::Record, reason)
        };
    }
    let gated = reason == Reason::All && policy.reply_gate.is_some();
    let mut reserved = false;
    if let Some(limit) = policy.rate_limit {
        if !room.members[p.0 as usize].rate.try_reserve(f.now, &limit) {
            return Verdict::new(Outcome::Skip, Reason::RateLimited);
        }
        reserved = true;
    }
    // Nobody asked: the room's budget for unasked replies, shared by all
    // its personas.
    let unprompted = reason == Reason::All
        && match room.reserve_unprompted(f.now, p, reserved) {
            Ok(taken) => taken,
            Err(()) => return Verdict::new(Outcome::Skip, Reason::UnpromptedBudget),
        };
    Verdict {
        outcome: Outcome::Reply,
        reason,
        action: if gated { Action::Gate } else { Action::Turn },
        reserved,
        unprompted,
    }
}
