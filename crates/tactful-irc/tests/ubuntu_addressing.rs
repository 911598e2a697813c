//! Addressing measured on real IRC: the Ubuntu IRC disentanglement corpus
//! (Kummerfeld et al., ACL 2019, CC-BY-4.0; its train and dev splits,
//! never its test split), as `scripts/irc-addressing-data.py` derived it.
//!
//! Each line names someone who speaks in the same log; the annotators
//! linked the messages into conversations. A nick the line names is
//! addressed when that nick speaks in the line's conversation (a nick
//! named in passing, by someone talking with others, is not): tactful,
//! given every nick a line names as a persona's, should address exactly
//! those.
//! The rules were tuned on train; dev is the check.

use std::collections::BTreeSet;

use serde::Deserialize;
use tactful_irc::text::mentioned;

#[derive(Deserialize)]
struct Line {
    log: String,
    n: u32,
    text: String,
    named: Vec<String>,
    /// The nicks named that speak in the line's conversation.
    with: Vec<String>,
}

/// What one split says: pairs (line, nick) addressed, found, and found
/// rightly; and the misses and false alarms, for reading.
#[derive(Default)]
struct Score {
    lines: usize,
    addressed: usize,
    found: usize,
    right: usize,
    misses: Vec<String>,
    false_alarms: Vec<String>,
}

impl Score {
    fn recall(&self) -> f64 {
        self.right as f64 / self.addressed.max(1) as f64
    }

    fn precision(&self) -> f64 {
        self.right as f64 / self.found.max(1) as f64
    }
}

fn score(split: &str) -> Score {
    let path = format!(
        "{}/tests/data/ubuntu-addressing-{split}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut s = Score::default();
    for row in text.lines() {
        let line: Line = serde_json::from_str(row).unwrap_or_else(|e| panic!("{path}: {e}: {row}"));
        let named: Vec<&str> = line.named.iter().map(String::as_str).collect();
        let found: BTreeSet<&str> = mentioned(&line.text, &named).into_iter().collect();
        let addressed: BTreeSet<&str> = named
            .iter()
            .copied()
            .filter(|n| line.with.iter().any(|t| t == n))
            .collect();
        s.lines += 1;
        s.addressed += addressed.len();
        s.found += found.len();
        s.right += found.intersection(&addressed).count();
        let at = format!("{}:{}", line.log, line.n);
        for n in addressed.difference(&found) {
            s.misses.push(format!("{at} [{n}] {}", line.text));
        }
        for n in found.difference(&addressed) {
            s.false_alarms.push(format!("{at} [{n}] {}", line.text));
        }
    }
    s
}

#[test]
fn lines_that_name_whom_they_answer_address_them() {
    for split in ["train", "dev"] {
        let s = score(split);
        eprintln!(
            "{split}: {} lines naming someone; {} nicks addressed, {} found, {} rightly: recall {:.2} %, precision {:.2} %",
            s.lines,
            s.addressed,
            s.found,
            s.right,
            100.0 * s.recall(),
            100.0 * s.precision()
        );
        // The goal, on the split nobody tuned on; a floor where the rules
        // were tuned, so that a change that loses what was gained fails.
        let (recall, precision) = if split == "dev" {
            (0.98, 0.985)
        } else {
            (0.975, 0.984)
        };
        assert!(
            s.recall() >= recall && s.precision() >= precision,
            "{split}: recall {:.4} (at least {recall}), precision {:.4} (at least {precision}); TACTFUL_SHOW_MISSES=1 lists them",
            s.recall(),
            s.precision()
        );
        if std::env::var_os("TACTFUL_SHOW_MISSES").is_some() {
            for m in &s.misses {
                eprintln!("miss  {m}");
            }
            for f in &s.false_alarms {
                eprintln!("alarm {f}");
            }
        }
    }
}
