//! `addressed_silence`: a persona asked directly whose agent answers
//! `NO_REPLY` leaves a sign it heard (a reaction, or a notice where the
//! platform has no reactions); silence on a message nobody addressed to it
//! stays silent.

use crate::common;

use common::{drain, ms, notices};
use std::sync::Arc;

use tactful_core::policy::{AddressedSilence, DEFAULT_SILENCE_NOTICE, PolicyPatch};
use tactful_core::{
    AgentResult, Engine, EngineConfig, Message, Mode, Output, PersonaSpec, PolicyTable, ReactNote,
    TurnRequest,
};

fn engine(patch: PolicyPatch) -> Engine {
    let mut policies = PolicyTable::default();
    policies.default.all = PolicyPatch {
        mode: Some(Mode::All),
        rate_limit: Some(None),
        ..patch
    };
    Engine::new(EngineConfig {
        personas: vec![PersonaSpec::new("docs", "a")],
        policies,
        ..Default::default()
    })
    .expect("valid engine config")
}

/// `text` is said, and the agent answers it with `answer`.
fn exchange(e: &mut Engine, id: &str, text: &str, answer: &str) -> Vec<Output> {
    e.handle_message(ms(0), Message::new(id, "lobby", "alice", text, ms(0)));
    let call: TurnRequest = drain(e)
        .into_iter()
        .find_map(|o| match o {
            Output::CallAgent(r) => Some(*r),
            _ => None,
        })
        .expect("a call");
    e.handle_agent_result(ms(1_000), call.turn, AgentResult::Output(answer.into()));
    drain(e)
}

fn reactions(out: &[Output]) -> Vec<ReactNote> {
    out.iter()
        .filter_map(|o| match o {
            Output::React(n) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_mention_answered_with_silence_gets_a_reaction_and_chatter_gets_nothing() {
    let mut e = engine(PolicyPatch::default());
    let out = exchange(&mut e, "q1", "@docs is the build green?", "NO_REPLY");
    assert!(out.iter().any(|o| matches!(o, Output::Silent(..))), "{out:#?}");
    let r = reactions(&out);
    assert_eq!(r.len(), 1, "{out:#?}");
    assert_eq!(
        (r[0].msg.as_str(), &*r[0].emoji, r[0].persona.as_str()),
        ("q1", "👀", "docs")
    );
    assert!(notices(&out).is_empty());

    // Nobody asked docs: its silence is silent.
    let out = exchange(&mut e, "q2", "the build is green", "NO_REPLY");
    assert!(reactions(&out).is_empty() && notices(&out).is_empty(), "{out:#?}");
}

#[test]
fn notice_mode_replies_and_silent_mode_says_nothing() {
    let mut e = engine(PolicyPatch {
        addressed_silence: Some(AddressedSilence::Notice),
        silence_notice: Some(Arc::from("Heard you; nothing to add.")),
        ..PolicyPatch::default()
    });
    let out = exchange(&mut e, "q1", "@docs thoughts?", "NO_REPLY");
    assert_eq!(
        notices(&out),
        [("Heard you; nothing to add.".to_owned(), Some("q1".to_owned()))]
    );
    assert!(reactions(&out).is_empty());

    let mut e = engine(PolicyPatch {
        addressed_silence: Some(AddressedSilence::Silent),
        ..PolicyPatch::default()
    });
    let out = exchange(&mut e, "q1", "@docs thoughts?", "NO_REPLY");
    assert!(reactions(&out).is_empty() && notices(&out).is_empty(), "{out:#?}");
}

#[test]
fn a_platform_without_reactions_gets_the_notice_instead() {
    let mut e = engine(PolicyPatch {
        silence_emoji: Some(Arc::from("🤔")),
        ..PolicyPatch::default()
    });
    let out = exchange(&mut e, "q1", "@docs thoughts?", "NO_REPLY");
    let r = reactions(&out);
    assert_eq!(&*r[0].emoji, "🤔");
    e.react_unsupported(ms(2_000), &r[0]);
    let out = drain(&mut e);
    assert_eq!(
        notices(&out),
        [(DEFAULT_SILENCE_NOTICE.to_owned(), Some("q1".to_owned()))]
    );
    // The notice is heard like any reply: docs records it as its own.
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Decision(d) if d.msg.as_str() == "docs:1")),
        "{out:#?}"
    );
}

#[test]
fn an_answer_is_not_a_silence() {
    let mut e = engine(PolicyPatch::default());
    let out = exchange(&mut e, "q1", "@docs is it green?", "Yes.");
    assert!(reactions(&out).is_empty() && notices(&out).is_empty());
}
