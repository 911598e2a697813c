//! The kb agent on tactful's own documentation.

use crate::common;

use std::sync::Arc;

use tactful_agents::kb::{DEFAULT_MIN_SCORE, KbAgent, KbDoc, parse_questions};
use tactful_core::{TurnKind, TurnRequest};

pub(crate) fn docs() -> Vec<KbDoc> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    ["README.md", "docs/faq.md", "docs/config.md", "docs/replay.md"]
        .iter()
        .map(|p| KbDoc {
            source: (*p).to_owned(),
            text: std::fs::read_to_string(root.join(p)).expect("doc"),
        })
        .collect()
}

pub(crate) fn ask(kind: TurnKind, addressed: bool, texts: &[&str]) -> TurnRequest {
    let mut t = common::turn();
    t.kind = kind;
    t.addressed = addressed;
    t.triggers = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let mut e = (*t.triggers[0]).clone();
            e.id = format!("q{i}").into();
            e.text = (*text).into();
            Arc::new(e)
        })
        .collect();
    t
}

/// Questions people ask, and the FAQ heading that answers each.
const QUESTIONS: &[(&str, &str)] = &[
    (
        "how do I stop a bot from answering every message?",
        "How do I stop",
    ),
    ("what does ambient mode do?", "What is ambient mode?"),
    ("how does the rate limit work?", "How does the rate limit work?"),
    ("how can the agent stay silent?", "How can an agent stay silent?"),
    (
        "how do I reply to a specific message?",
        "How does a bot reply to a specific message?",
    ),
    (
        "what is the reply decision gate?",
        "What is the reply-decision gate?",
    ),
    (
        "how do I use a local model with ollama?",
        "How do I use a local model with Ollama?",
    ),
    (
        "can I run claude code as a persona?",
        "Can I run Claude Code as a persona?",
    ),
];

/// Everyday chatter, some of it phrased as questions.
const CHATTER: &[&str] = &[
    "lunch at noon?",
    "anyone seen my keys?",
    "good morning everyone",
    "the weather is lovely today",
    "did you watch the game last night?",
    "brb, coffee",
];

pub(crate) fn kb() -> KbAgent {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let questions =
        parse_questions(&std::fs::read_to_string(root.join("docs/questions.toml")).expect("questions"))
            .expect("docs/questions.toml parses");
    KbAgent::new(&docs(), DEFAULT_MIN_SCORE)
        .with_questions(&questions)
        .expect("every section docs/questions.toml names is in the docs")
}

#[test]
fn documentation_questions_are_answered_with_a_citation() {
    let kb = kb();
    for (q, heading) in QUESTIONS {
        let a = kb.answer(&ask(TurnKind::Ambient, false, &["morning all", q]));
        assert!(
            a.starts_with("[[reply_to:q1]]\n"),
            "answers the question, as a reply: {a}"
        );
        assert!(a.contains("(from docs/faq.md, \""), "cites its source: {a}");
        assert!(a.contains(heading), "{q} -> {a}");
    }
}

#[test]
fn chatter_gets_silence_in_a_batch() {
    let kb = kb();
    assert_eq!(kb.answer(&ask(TurnKind::Ambient, false, CHATTER)), "NO_REPLY");
    for c in CHATTER {
        // Not even one line of chatter alone, unless it is a question that
        // clears the threshold (none of these do).
        assert_eq!(kb.answer(&ask(TurnKind::Ambient, false, &[c])), "NO_REPLY", "{c}");
    }
}

#[test]
fn asked_directly_it_says_when_it_does_not_know() {
    let kb = kb();
    let a = kb.answer(&ask(
        TurnKind::Reply,
        true,
        &["@guide what is the capital of peru?"],
    ));
    assert!(a.contains("couldn't find that in the docs"), "{a}");
    // Small talk to it is not a doubt about the docs: no "Not sure" links.
    for talk in [
        "@guide good morning!",
        "@guide lol nice one",
        "@guide how are you today?",
        "@guide see you tomorrow",
    ] {
        let a = kb.answer(&ask(TurnKind::Reply, true, &[talk]));
        assert!(!a.contains("Not sure"), "{talk}: {a}");
    }
    let a = kb.answer(&ask(TurnKind::Reply, false, &["what is the capital of peru?"]));
    assert_eq!(a, "NO_REPLY", "not addressed: silence");
    let a = kb.answer(&ask(
        TurnKind::Reply,
        true,
        &["@guide how does the rate limit work?"],
    ));
    assert!(a.contains("slot is reserved"), "{a}");
}

/// "good thanks! lunch at noon?" then "what is ambient mode?" in one batch:
/// the answer is about ambient mode, as a reply to the question.
#[test]
fn in_a_batch_the_question_is_answered_not_the_chatter_beside_it() {
    let turn = ask(
        TurnKind::Ambient,
        false,
        &["good thanks! lunch at noon?", "what is ambient mode?"],
    );
    let got = kb().answer(&turn);
    assert!(got.starts_with("[[reply_to:q1]]"), "{got}");
    assert!(
        got.contains("(from docs/faq.md, \"What is ambient mode?\")"),
        "{got}"
    );
}

/// "Can you say more?" as a reply to `answer` (one of the Guide's own).
fn say_more_to(answer: &str) -> TurnRequest {
    let mut turn = ask(TurnKind::Reply, true, &["can you say more?"]);
    let mut own = (*turn.history[0]).clone();
    own.id = "guide:1".into();
    own.persona = Some(turn.persona_idx);
    own.text = answer
        .split_once('\n')
        .map(|(_, body)| body)
        .unwrap_or_default()
        .into();
    turn.history.push(std::sync::Arc::new(own));
    let mut q = (*turn.triggers[0]).clone();
    q.reply_to = Some("guide:1".into());
    turn.triggers = vec![std::sync::Arc::new(q)];
    turn
}

/// A reply to one of its own answers ("can you say more?") goes on where
/// that answer came from, instead of searching for "more": a FAQ entry is
/// one paragraph, so it goes on in the longer section of docs/config.md;
/// asked again, further in that section; at the end, it says so.
#[test]
fn a_follow_up_continues_into_the_longer_section() {
    let kb = kb();
    let first = kb.answer(&ask(TurnKind::Ambient, false, &["what is ambient mode?"]));
    assert!(
        first.contains("(from docs/faq.md, \"What is ambient mode?\")"),
        "{first}"
    );
    let more = kb.answer(&say_more_to(&first));
    assert!(more.starts_with("[[reply_to:q0]]"), "{more}");
    assert!(
        more.contains("(from docs/config.md, \"`ambient`: listening without paying per message\")"),
        "{more}"
    );
    assert!(!more.contains("couldn't find"), "{more}");
    let excerpt = |t: &str| t.lines().nth(1).unwrap_or_default().to_owned();
    assert_ne!(
        excerpt(&more),
        excerpt(&first),
        "says something more:\n{first}\n---\n{more}"
    );
    // And on, until there is no more: then it says so, once.
    let mut last = more;
    for _ in 0..20 {
        let next = kb.answer(&say_more_to(&last));
        assert!(next.contains("(from docs/"), "{next}");
        if next.contains("That is all the docs say") {
            return;
        }
        assert_ne!(excerpt(&next), excerpt(&last), "each says something new");
        last = next;
    }
    panic!("a section ends: {last}");
}

/// With `answer_with`, a model answers with the sections the search found
/// before it; chatter in a batch costs no call at all.
#[test]
fn a_model_answers_from_the_sections_found() {
    use tactful_agents::{Agent, AgentError, AgentReply, Deltas, NoDeltas};
    #[derive(Debug, Default)]
    struct Model(std::sync::Mutex<Vec<String>>);
    impl Agent for Model {
        fn run<'a>(
            &'a self,
            turn: &'a TurnRequest,
            _: &'a mut dyn Deltas,
        ) -> futures::future::BoxFuture<'a, Result<AgentReply, AgentError>> {
            self.0.lock().expect("lock").push(turn.prompt.to_string());
            Box::pin(async { Ok(AgentReply::text("an answer".to_owned())) })
        }
    }
    let model = std::sync::Arc::new(Model::default());
    let grounded = tactful_agents::kb::GroundedAgent::new(kb(), model.clone());
    let run = |turn: TurnRequest| {
        futures::executor::block_on(async { grounded.run(&turn, &mut NoDeltas).await.expect("runs").text })
    };
    assert_eq!(
        run(ask(TurnKind::Ambient, false, &["lunch at noon anyone?"])),
        "NO_REPLY"
    );
    assert!(
        model.0.lock().expect("lock").is_empty(),
        "chatter costs no model call"
    );
    assert_eq!(
        run(ask(TurnKind::Ambient, false, &["what is ambient mode?"])),
        "an answer"
    );
    let prompt = model.0.lock().expect("lock").pop().expect("one call");
    assert!(
        prompt.contains("docs/faq.md · \"What is ambient mode?\""),
        "{prompt}"
    );
    assert!(
        prompt.contains("(from FILE, \"HEADING\")"),
        "asked to cite: {prompt}"
    );
    // Asked directly about what the docs do not cover, it still answers,
    // told so.
    assert_eq!(run(ask(TurnKind::Reply, true, &["zxqv wibble?"])), "an answer");
    let prompt = model.0.lock().expect("lock").pop().expect("one call");
    assert!(prompt.contains("no section"), "{prompt}");
}

/// Three questions in one batch: each gets its own reply, newest first.
#[test]
fn every_question_of_a_batch_gets_its_own_reply_newest_first() {
    let turn = ask(
        TurnKind::Ambient,
        false,
        &[
            "what is ambient mode?",
            "lunch anyone?",
            "how does the rate limit work?",
            "what is floor control?",
        ],
    );
    let got = kb().answer(&turn);
    let replies = tactful_core::directives::split_replies(&got);
    let to: Vec<Option<&str>> = replies.iter().map(|(d, _)| d.reply_to.as_deref()).collect();
    assert_eq!(to, [Some("q3"), Some("q2"), Some("q0")], "{got}");
    assert!(replies[0].1.contains("\"What is floor control?\""), "{got}");
}

/// A line in people's words, which the words of the section answering it
/// do not find, is found through the example questions written for that
/// section (`docs/questions.toml`; the line, from `tests/guide/dev.jsonl`, is not
/// one of them).
#[test]
fn example_questions_lead_to_a_section_the_words_alone_miss() {
    let line = "can i run my own python script to review every reply before it's posted";
    let hooks = "(from docs/config.md, \"`[[hook]]`: before-send hooks\")";
    let asked = ask(TurnKind::Reply, true, &[line]);
    let plain = KbAgent::new(&docs(), DEFAULT_MIN_SCORE).answer(&asked);
    assert!(!plain.ends_with(hooks), "the words alone: {plain}");
    let a = kb().answer(&asked);
    assert!(a.ends_with(hooks), "{a}");
}

/// An answer quotes the part of the section that answers, not its
/// opening: a question naming `pass_timeout_ms` gets the row of the floor
/// section's table that says what it is, under the table's head.
#[test]
fn the_answer_quotes_the_block_that_answers_not_the_section_s_opening() {
    let a = kb().answer(&ask(
        TurnKind::Reply,
        true,
        &["@guide how long is pass_timeout_ms by default?"],
    ));
    let (quote, cite) = a.rsplit_once("\n\n(from ").expect("a cited answer");
    assert_eq!(cite, "docs/config.md, \"`floor`: one answer, not three\")", "{a}");
    assert!(
        quote.ends_with("| key | default | meaning |\n|---|---|---|\n| `pass_timeout_ms` | `30000` | with `pass`: how long the persona asked has before the next is asked too (at least 100) |"),
        "the row, not the section's opening: {a}"
    );
}

/// Two sections that answer a question about as well as each other: not
/// one confident pick, but "Not sure —" and both, as `file#anchor` links
/// with their titles; a clear winner is answered as before.
#[test]
fn when_two_sections_tie_it_says_it_is_not_sure_and_links_both() {
    let docs = [
        KbDoc {
            source: "a.md".into(),
            text: "# Bot tokens\n\nA bot token is set in its own table.\n".into(),
        },
        KbDoc {
            source: "b.md".into(),
            text: "# Tokens of bots\n\nA token of a bot comes from the platform's developer page.\n\n# Lunch menus\n\nThe canteen serves soup on Mondays and pasta on Fridays.\n".into(),
        },
    ];
    let kb = KbAgent::new(&docs, 1.0);
    let a = kb.answer(&ask(TurnKind::Reply, true, &["@guide bot tokens?"]));
    assert!(a.starts_with("[[reply_to:q0]]\nNot sure — "), "{a}");
    assert!(a.contains("\n- Bot tokens — a.md#bot-tokens"), "{a}");
    assert!(a.contains("\n- Tokens of bots — b.md#tokens-of-bots"), "{a}");
    assert!(!a.contains("Lunch"), "only sections near the question: {a}");
    let sure = kb.answer(&ask(
        TurnKind::Reply,
        true,
        &["@guide what does the canteen serve on fridays?"],
    ));
    assert!(sure.ends_with("(from b.md, \"Lunch menus\")"), "{sure}");
}
