//! The kb agent on tactful's own documentation.

use crate::common;

use std::sync::Arc;

use tactful_agents::kb::{DEFAULT_MIN_SCORE, KbAgent, KbDoc, parse_questions};
use tactful_core::{TurnKind, TurnRequest};

fn docs() -> Vec<KbDoc> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    ["README.md", "docs/faq.md", "docs/config.md", "docs/replay.md"]
        .iter()
        .map(|p| KbDoc {
            source: (*p).to_owned(),
            text: std::fs::read_to_string(root.join(p)).expect("doc"),
        })
        .collect()
}

fn ask(kind: TurnKind, addressed: bool, texts: &[&str]) -> TurnRequest {
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

fn kb() -> KbAgent {
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

/// How the Guide did on one labelled set.
#[derive(Default)]
struct Score {
    chatter: u32,
    silent: u32,
    questions: u32,
    /// Answered from a right section (or, for a question the docs do not
    /// answer, not answered with confidence).
    right: u32,
    /// "Not sure —" with a right section among its links.
    unsure: u32,
    /// Answered with confidence from a wrong section.
    wrong: u32,
    misses: Vec<String>,
}

impl Score {
    fn quiet(&self) -> f64 {
        f64::from(self.silent) / f64::from(self.chatter)
    }
    fn recall(&self) -> f64 {
        f64::from(self.right) / f64::from(self.questions)
    }
    /// Right, or honestly unsure with a right link.
    fn helped(&self) -> f64 {
        f64::from(self.right + self.unsure) / f64::from(self.questions)
    }
    fn wrong_rate(&self) -> f64 {
        f64::from(self.wrong) / f64::from(self.questions)
    }
    fn add(&mut self, o: &Score) {
        self.chatter += o.chatter;
        self.silent += o.silent;
        self.questions += o.questions;
        self.right += o.right;
        self.unsure += o.unsure;
        self.wrong += o.wrong;
    }
    /// Prints what a tuning set got wrong, with `KB_MISSES=1` (never for a
    /// frozen set).
    fn print_misses_if_asked(&self) {
        if std::env::var_os("KB_MISSES").is_some() {
            for m in &self.misses {
                println!("  {m}");
            }
        }
    }
    /// Fails unless at least 150 lines of each kind were heard, `quiet` of
    /// the chatter was left alone, `helped` of the questions answered from
    /// a right section or not sure with a right link, and at most `wrong`
    /// answered with confidence from a wrong section.
    fn holds(&self, quiet: f64, helped: f64, wrong: f64) {
        assert!(
            self.chatter >= 150 && self.questions >= 150,
            "at least 150 of each"
        );
        assert!(
            self.quiet() >= quiet,
            "chatter left alone: {:.1} % < {:.0} %",
            self.quiet() * 100.0,
            quiet * 100.0
        );
        assert!(
            self.helped() >= helped,
            "questions answered right or not sure with a right link: {:.1} % < {:.0} %",
            self.helped() * 100.0,
            helped * 100.0
        );
        assert!(
            self.wrong_rate() <= wrong,
            "questions answered wrong with confidence: {:.1} % > {:.0} %",
            self.wrong_rate() * 100.0,
            wrong * 100.0
        );
    }
    fn print(&self, name: &str) {
        let pct = |n: u32, of: u32| f64::from(n) * 100.0 / f64::from(of.max(1));
        println!(
            "{name}: {} chatter lines, {} unanswered ({:.1} %); {} questions: {} answered right ({:.1} %), {} not sure with a right link ({:.1} %), {} answered wrong ({:.1} %)",
            self.chatter,
            self.silent,
            pct(self.silent, self.chatter),
            self.questions,
            self.right,
            pct(self.right, self.questions),
            self.unsure,
            pct(self.unsure, self.questions),
            self.wrong,
            pct(self.wrong, self.questions),
        );
    }
}

/// What the Guide did with a line.
enum Said {
    Nothing,
    /// Answered, citing `file#heading`.
    Cited(String),
    /// "Not sure —", with these `file#anchor` links.
    Unsure(Vec<String>),
}

fn said(got: &str) -> Said {
    if got == "NO_REPLY" {
        return Said::Nothing;
    }
    if got.contains("\nNot sure — ") {
        return Said::Unsure(
            got.lines()
                .filter_map(|l| {
                    l.strip_prefix("- ")?
                        .rsplit_once(" — ")
                        .map(|(_, link)| link.to_owned())
                })
                .collect(),
        );
    }
    let cited = got.rsplit_once("\n\n(from ").map(|(_, c)| {
        let (source, heading) = c.trim_end_matches(')').split_once(", ").unwrap_or_default();
        format!("{source}#{}", heading.trim_matches('"'))
    });
    Said::Cited(cited.unwrap_or_default())
}

/// `file#heading` as a link anchors it (GitHub's rule, as the Guide
/// writes its links).
fn anchored(name: &str) -> String {
    let (file, heading) = name.split_once('#').unwrap_or((name, ""));
    let a: String = heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect();
    format!("{file}#{a}")
}

/// Each line of `tests/guide/<file>` heard alone in an ambient batch, as in
/// the demo: chatter must get no reply; a question about tactful must be
/// answered from one of its right sections (or be met with "not sure" and
/// a right link); a question the docs do not answer (`"kind":
/// "question"`, no section) must not be answered with confidence.
fn score(file: &str) -> Score {
    score_of(&kb(), file)
}

/// [`score`] for any kb agent.
fn score_of(kb: &KbAgent, file: &str) -> Score {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/guide")
        .join(file);
    let mut s = Score::default();
    for line in std::fs::read_to_string(&path).expect("the labelled set").lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let text = v["text"].as_str().expect("text");
        let want: Vec<&str> = v["answer"]
            .as_array()
            .expect("answer")
            .iter()
            .filter_map(|a| a.as_str())
            .collect();
        let got = kb.answer(&ask(TurnKind::Ambient, false, &[text]));
        // For scripts/guide-train.py, appended to the file `KB_EXPORT`
        // names (printed lines would share one with the test runner's
        // own); never a frozen set.
        if let Some(out) = std::env::var_os("KB_EXPORT")
            && tuning(file)
        {
            use std::io::Write as _;
            let mut row = kb.export(text);
            row["set"] = file.into();
            row["want"] = want.clone().into();
            row["kind"] = v["kind"].clone();
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&out)
                .expect("KB_EXPORT names a writable file");
            // One write a line: tests run in parallel append whole lines.
            f.write_all(format!("{row}\n").as_bytes())
                .expect("export written");
        }
        let unanswerable = want.is_empty() && v["kind"] == "question";
        let said = said(&got);
        if want.is_empty() && !unanswerable {
            s.chatter += 1;
            match said {
                Said::Nothing => s.silent += 1,
                _ => s.misses.push(format!("chatter answered: {text:?} -> {got:?}")),
            }
            continue;
        }
        s.questions += 1;
        match said {
            Said::Cited(c) if unanswerable => {
                s.wrong += 1;
                s.misses
                    .push(format!("not in the docs, answered from {c:?}: {text:?}"));
            }
            Said::Nothing | Said::Unsure(_) if unanswerable => s.right += 1,
            Said::Cited(c) if want.contains(&c.as_str()) => s.right += 1,
            Said::Cited(c) => {
                s.wrong += 1;
                s.misses
                    .push(format!("question {text:?} -> {c:?}, want one of {want:?}"));
            }
            Said::Unsure(links) if want.iter().any(|w| links.contains(&anchored(w))) => s.unsure += 1,
            Said::Unsure(links) => s.misses.push(format!(
                "question {text:?} -> not sure: {links:?}, want one of {want:?}"
            )),
            Said::Nothing => s.misses.push(format!("question {text:?} -> nothing")),
        }
    }
    s.print(file);
    s
}

/// Whether `file` is a set the Guide may be tuned on
/// (`tests/guide/tuning.txt`, which `scripts/guide-train.py` reads too);
/// the others are frozen.
fn tuning(file: &str) -> bool {
    include_str!("../../../tests/guide/tuning.txt")
        .lines()
        .any(|l| !l.starts_with('#') && l.trim() == file)
}

/// The set the Guide is tuned on (`tests/guide/labelled.jsonl`; add the
/// lines that fool it). Prints the figures for BENCHMARKS.md:
/// `cargo test -p tactful-agents --test it labelled -- --nocapture`.
#[test]
fn the_labelled_set_meets_its_precision_and_recall() {
    let s = score("labelled.jsonl");
    for m in &s.misses {
        println!("  {m}");
    }
    assert!(s.chatter + s.questions >= 200, "the set has at least 200 lines");
    assert!(
        s.quiet() >= 0.95,
        "chatter left alone: {:.1} % < 95 %",
        s.quiet() * 100.0
    );
    assert!(
        s.helped() >= 0.90 && s.wrong_rate() <= 0.05,
        "questions right or not sure with a right link: {:.1} % < 90 %, or wrong {:.1} % > 5 %",
        s.helped() * 100.0,
        s.wrong_rate() * 100.0
    );
}

/// A kb without example questions (what an operator has until they
/// write some) keeps what it did before them: the gate is trained on its
/// lines too (`KB_EXPORT` exports them), told apart by whether a kb has
/// examples. The labelled set's goal, and on the dev set no less than
/// today.
#[test]
fn a_kb_without_questions_answers_the_sets_as_well_as_before() {
    let plain = KbAgent::new(&docs(), DEFAULT_MIN_SCORE);
    let [labelled, dev, _dev2] = ["labelled.jsonl", "dev.jsonl", "dev2.jsonl"].map(|f| score_of(&plain, f));
    assert!(
        labelled.quiet() >= 0.95 && labelled.helped() >= 0.90,
        "{:.3} / {:.3}",
        labelled.quiet(),
        labelled.helped()
    );
    dev.holds(0.97, DEV_PLAIN.0, DEV_PLAIN.1);
}

/// Today's figures on the dev sets (right or not sure with a right link,
/// at least; answered wrong, at most), so a change that loses ground
/// fails: the dev set with and without example questions, and the second
/// dev set.
const DEV: (f64, f64) = (0.92, 0.07);
const DEV_PLAIN: (f64, f64) = (0.82, 0.15);
const DEV2: (f64, f64) = (0.90, 0.08);

/// The development set (`tests/guide/dev.jsonl`): written like the frozen
/// one, by someone who saw neither the code nor the scores, for tuning
/// (the learned gate is trained on it, so this figure is in-sample;
/// `scripts/guide-train.py --cv` gives the held-out one); its misses are
/// printed with `KB_MISSES=1`:
/// `cargo test -p tactful-agents --test it dev_set -- --nocapture`.
/// The bounds are today's figures; being in-sample, they say nothing of
/// the goal, which the frozen sets measure (BENCHMARKS.md).
#[test]
fn the_dev_set_is_answered_no_worse_than_today() {
    let s = score("dev.jsonl");
    s.print_misses_if_asked();
    s.holds(0.97, DEV.0, DEV.1);
}

/// A second development set (`tests/guide/dev2.jsonl`, 2026-11-28),
/// written like the others, for tuning: the gate learns from it too, so
/// its figure is in-sample (`scripts/guide-train.py --cv` gives the
/// held-out one); `KB_MISSES=1` prints what it gets wrong.
#[test]
fn the_second_dev_set_is_answered_no_worse_than_today() {
    let s = score("dev2.jsonl");
    s.print_misses_if_asked();
    s.holds(0.97, DEV2.0, DEV2.1);
}

/// The frozen sets (`tests/guide/frozen*.jsonl`): each written by someone
/// who read the documents but saw nothing of the Guide's (its code, its
/// example questions, the other sets, any score), never tuned on, so
/// together they say how the Guide does on questions nobody tuned it for.
/// Their misses are not printed, so nobody tunes on them by accident:
/// `cargo test -p tactful-agents --test it frozen -- --nocapture`.
/// `BENCHMARKS.md` says when each was written and measured.
const FROZEN: [&str; 6] = [
    "frozen.jsonl",
    "frozen2.jsonl",
    "frozen3.jsonl",
    "frozen4.jsonl",
    "frozen5.jsonl",
    "frozen6.jsonl",
];

/// The goal, on all the frozen sets' lines together: 95 % of chatter left
/// alone, 85 % of questions answered from a right section or met with
/// "not sure" and a right link, at most 10 % answered wrong.
#[test]
fn the_frozen_sets_together_meet_the_goal() {
    let mut all = Score::default();
    for file in FROZEN {
        let s = score(file);
        // Each set on its own: the goal's chatter, and its questions no
        // more than a few short of it (sets of 160 to 205 questions move
        // by a question or two when the docs grow).
        s.holds(0.95, 0.83, 0.12);
        all.add(&s);
    }
    all.print("all frozen sets");
    all.holds(0.95, 0.85, 0.10);
}

/// Whether `s` is no worse than `bounds`: right, right or not sure with a
/// right link (at least), answered wrong (at most), chatter left alone (at
/// least).
fn at_least(s: &Score, bounds: (f64, f64, f64, f64)) -> bool {
    s.recall() >= bounds.0 && s.helped() >= bounds.1 && s.wrong_rate() <= bounds.2 && s.quiet() >= bounds.3
}

/// The first four newcomers' sets (`tests/guide/newcomer.jsonl` to
/// `newcomer4.jsonl`): each measured once when it was new (BENCHMARKS.md),
/// then made a set the Guide is tuned on (`scripts/guide-train.py` learns
/// from them; `KB_MISSES=1` prints what it gets wrong). The bounds are
/// today's figures, in-sample.
#[test]
fn the_newcomers_tuning_sets_are_answered_no_worse_than_today() {
    let scores = [
        ("newcomer.jsonl", (0.56, 0.79, 0.117, 1.0)),
        ("newcomer2.jsonl", (0.48, 0.86, 0.017, 1.0)),
        ("newcomer3.jsonl", (0.46, 0.81, 0.067, 1.0)),
        ("newcomer4.jsonl", (0.46, 0.74, 0.051, 1.0)),
    ]
    .map(|(file, bounds)| (file, bounds, score(file)));
    // Scored (and exported, with `KB_EXPORT`) all before any is judged.
    for (file, bounds, s) in scores {
        s.print_misses_if_asked();
        assert_eq!((s.questions, s.chatter), (60, 40), "{file}");
        assert!(at_least(&s, bounds), "{file} lost ground");
    }
}

/// The newcomers' sets never tuned on (`tests/guide/newcomer5.jsonl` to
/// `newcomer8.jsonl`, 2026-11-30): each 60 questions and 40 lines of
/// chatter written by someone given only the README's first paragraph
/// (not the docs), labelled afterwards by another who read only the four
/// documents, frozen before anything was measured. The goal: at least 65 %
/// right, 85 % right or not sure with a right link, at most 10 % answered
/// wrong, at most 2 % of chatter answered. Their misses are never printed:
/// `cargo test -p tactful-agents --test it newcomers -- --nocapture`.
/// The bounds are the figures BENCHMARKS.md gives, so the test fails if
/// the Guide falls below them.
#[test]
fn the_frozen_newcomers_sets_are_measured() {
    let scores = [
        ("newcomer5.jsonl", NEWCOMER5),
        ("newcomer6.jsonl", NEWCOMER6),
        ("newcomer7.jsonl", NEWCOMER7),
        ("newcomer8.jsonl", NEWCOMER8),
    ]
    .map(|(file, bounds)| (file, bounds, score(file)));
    let mut all = Score::default();
    for (_, _, s) in &scores {
        all.add(s);
    }
    all.print("the frozen newcomers' sets");
    for (file, bounds, s) in scores {
        assert_eq!((s.questions, s.chatter), (60, 40), "{file}");
        assert!(
            at_least(&s, bounds),
            "{file}: the figures fell below what BENCHMARKS.md says"
        );
    }
}

/// The frozen newcomers' figures as measured (BENCHMARKS.md), in the
/// order of [`at_least`].
const NEWCOMER5: (f64, f64, f64, f64) = (0.345, 0.695, 0.051, 1.0);
const NEWCOMER6: (f64, f64, f64, f64) = (0.395, 0.695, 0.134, 1.0);
const NEWCOMER7: (f64, f64, f64, f64) = (0.395, 0.595, 0.051, 1.0);
const NEWCOMER8: (f64, f64, f64, f64) = (0.38, 0.68, 0.101, 1.0);

/// The example questions and the chatter lines the Guide is built with
/// share no line with the sets that measure it (compared as lowercase
/// letters, digits and spaces): a set's line among them would be answered
/// from memory, and its figure would say nothing about new lines.
#[test]
fn no_line_of_a_set_is_built_into_the_guide() {
    let norm = |t: &str| -> String {
        t.to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ')
            .collect::<String>()
            .trim()
            .to_owned()
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let questions =
        parse_questions(&std::fs::read_to_string(root.join("docs/questions.toml")).expect("questions"))
            .expect("parses");
    let chatter =
        std::fs::read_to_string(root.join("crates/tactful-agents/src/kb/chatter.txt")).expect("chatter");
    let built: std::collections::HashSet<String> = questions
        .iter()
        .flat_map(|q| q.asks.iter().map(|a| norm(a)))
        .chain(chatter.lines().map(norm))
        .collect();
    for entry in std::fs::read_dir(root.join("tests/guide")).expect("sets") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let shared = std::fs::read_to_string(&path)
            .expect("set")
            .lines()
            .filter(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
                built.contains(&norm(v["text"].as_str().expect("text")))
            })
            .count();
        // Counted, not shown: a frozen set's lines stay unread.
        assert_eq!(shared, 0, "{} shares lines with the Guide's data", path.display());
    }
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
