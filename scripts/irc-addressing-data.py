#!/usr/bin/env python3
"""Makes crates/tactful-irc/tests/data/ubuntu-addressing-{train,dev}.jsonl
from the Ubuntu IRC disentanglement corpus (Kummerfeld et al., ACL 2019,
CC-BY-4.0): its train and dev splits only, never its test split.

Usage: scripts/irc-addressing-data.py CORPUS_DATA_DIR
where CORPUS_DATA_DIR holds the corpus's `train/` and `dev/` folders
(`*.raw.txt` and `*.annotation.txt`).

For every line (from the first annotated one, message 1,000) that names,
as a whole word in IRC case mapping, someone who speaks in the same log,
one record: who said it, the text, the nicks it names (speakers of the
log other than its author), and `to`, the authors of the earlier messages
the annotators linked it to (whom it answers), and `with`, the nicks it
names that speak in its conversation (the messages linked to it,
directly or not). Lines naming nobody are left out: no addressing rule
can address them to a nick.
"""
import json
import re
import sys
from pathlib import Path

LINE = re.compile(r"^\[\d\d:\d\d\] <([^>]+)> (.*)$")
NICK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_[]\\`^{}|")


def lower(s):
    return s.lower().translate(str.maketrans("[]\\~", "{}|^"))


def names(text, nick):
    """Whether `text` holds `nick` as a whole word (IRC case mapping)."""
    t, n = lower(text), lower(nick)
    start = 0
    while True:
        i = t.find(n, start)
        if i < 0:
            return False
        before = t[i - 1] if i > 0 else " "
        after = t[i + len(n)] if i + len(n) < len(t) else " "
        if before not in NICK and after not in NICK:
            return True
        start = i + 1


def records(split, raw, annotation):
    lines = raw.read_text(encoding="utf-8", errors="replace").split("\n")
    said = {}
    for i, line in enumerate(lines):
        m = LINE.match(line)
        if m:
            said[i] = (m.group(1), m.group(2))
    # IRC nicks are one nick whatever their case ("Cesarin", "cesarin"):
    # each is named once, as first written.
    speakers = {}
    for nick, _ in said.values():
        speakers.setdefault(lower(nick), nick)
    parents, root = {}, {}

    def find(x):
        while root.setdefault(x, x) != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for row in annotation.read_text().split("\n"):
        parts = row.split()
        if len(parts) < 2:
            continue
        a, b = int(parts[0]), int(parts[1])
        root[find(a)] = find(b)
        if a != b:
            parents.setdefault(max(a, b), set()).add(min(a, b))
    # Who speaks in each conversation (the annotators' threads: messages
    # linked, directly or not).
    voices = {}
    for i, (nick, _) in said.items():
        if i in root:
            voices.setdefault(find(i), set()).add(lower(nick))
    for i in sorted(said):
        if i < 1000:
            continue
        author, text = said[i]
        named = sorted(n for k, n in speakers.items() if k != lower(author) and names(text, n))
        if not named:
            continue
        to = sorted({said[p][0] for p in parents.get(i, ()) if p in said and lower(said[p][0]) != lower(author)})
        talks = sorted(n for n in named if i in root and lower(n) in voices.get(find(i), ()))
        yield {"log": raw.name.removesuffix(".raw.txt"), "n": i,
               "from": author, "text": text, "named": named, "to": to, "with": talks}


def main():
    root = Path(sys.argv[1])
    out = Path(__file__).resolve().parent.parent / "crates/tactful-irc/tests/data"
    for split in ("train", "dev"):
        rows = []
        for raw in sorted((root / split).glob("*.raw.txt")):
            ann = raw.with_name(raw.name.replace(".raw.txt", ".annotation.txt"))
            rows.extend(records(split, raw, ann))
        path = out / f"ubuntu-addressing-{split}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(f"{path}: {len(rows)} lines")


if __name__ == "__main__":
    main()
