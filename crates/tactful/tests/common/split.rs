//! A long answer that every platform sends in several parts, and what a
//! `kill -9` in the middle of it may do: send again at most the one part
//! in flight, lose none, and finish the answer after a restart.

use std::collections::BTreeMap;

/// Lines of the answer; ~100 characters each, 15,000 in all: four parts
/// on Telegram, Slack and the web room, eight on Discord. (Matrix takes
/// 16,000 characters a message: its test asks for [`LONG`] lines.)
pub const LINES: usize = 150;

/// Lines of an answer Matrix splits: about four of its messages.
pub const LONG: usize = 600;

/// An answer of `lines` lines, as a TOML basic string's contents (`\n`
/// escaped).
pub fn story(lines: usize) -> String {
    (0..lines)
        .map(|n| format!("{} {}\\n", marker(n), "-".repeat(88)))
        .collect()
}

/// `config` with docs telling the story when asked for it: a rule put
/// before its catch-all `{ when = "", reply = "docs answers …" }` (the
/// platform suites' shared shape).
pub fn told_by_docs(config: &str) -> String {
    let catch_all = r#"{ when = "", reply = "docs answers"#;
    assert!(config.contains(catch_all), "docs has its catch-all rule");
    config.replace(
        catch_all,
        &format!(
            "{{ when = \"story\", reply = \"{}\" }},\n  {catch_all}",
            story(LINES)
        ),
    )
}

/// What names line `n` of the answer wherever it is shown.
pub fn marker(n: usize) -> String {
    format!("line {n:03}")
}

/// The line numbers `post` shows.
fn lines_in(post: &str) -> Vec<usize> {
    post.match_indices("line ")
        .filter_map(|(at, _)| post.get(at + 5..at + 8)?.parse().ok())
        .collect()
}

/// Whether `posts` (every post of the answer's author in the room, in
/// order) show the last of `lines` lines.
pub fn finished(posts: &[String], lines: usize) -> bool {
    posts.iter().any(|p| p.contains(&marker(lines - 1)))
}

/// Asserts that `posts` hold every one of `lines` lines, and that the
/// only lines said twice are those of one part posted twice alike (the
/// one in flight at the kill).
pub fn once_but_the_part_in_flight(posts: &[String], lines: usize) {
    let mut seen: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, post) in posts.iter().enumerate() {
        for n in lines_in(post) {
            seen.entry(n).or_default().push(i);
        }
    }
    let lost: Vec<usize> = (0..lines).filter(|n| !seen.contains_key(n)).collect();
    assert!(lost.is_empty(), "lines lost: {lost:?} in {posts:#?}");
    let twice: Vec<&Vec<usize>> = seen.values().filter(|at| at.len() > 1).collect();
    if let Some(first) = twice.first() {
        assert!(
            first.len() == 2 && twice.iter().all(|at| at == first),
            "more than one part said twice: {twice:?}"
        );
        assert_eq!(
            posts[first[0]], posts[first[1]],
            "the part said twice is the same part"
        );
    }
}
