#!/usr/bin/env python3
"""Builds examples/eval/ubuntu-dev.jsonl from the Ubuntu IRC disentanglement
corpus (Kummerfeld et al., ACL 2019; data under CC-BY-4.0).

The corpus links each message of #ubuntu to the messages it answers. In
each log, the person who answered others the most stands for a persona,
"helper": their own lines are taken out (the persona speaks in their
place), their nick in others' lines becomes "helper", and every other
person's annotated message is labelled `reply` if they answered it and
`silent` otherwise. The 50 lines before the annotated part are played as
context, unlabelled. Each log is its own room.

Addressing is marked as tactful's IRC platform reads it in its common
forms: the nick opening the line (`helper: …`, `helper, …`) or `@helper`.

Only the dev split is read (the test split is never used, for anything).

Usage (from the repository root, with the corpus checked out somewhere):
  scripts/eval-from-disentanglement.py PATH/TO/irc-disentanglement/data/dev > examples/eval/ubuntu-dev.jsonl
"""
import json
import re
import sys
from collections import Counter
from pathlib import Path

CONTEXT = 50
# Bots of the channel: never a helper, their lines kept as context.
BOTS = {"ubotu", "ubottu", "ubot5", "ubot2"}
LINE = re.compile(r"^\[(\d\d):(\d\d)\] (?:<([^>]+)> (.*)|\s*\* (\S+) (.*))$")


def read_log(path):
    """Each line: (minute of the day or None, nick or None, text)."""
    out = []
    for raw in path.read_text(encoding="ascii", errors="replace").splitlines():
        m = LINE.match(raw)
        if not m:
            out.append((None, None, raw))  # system line: joins, quits, renames
            continue
        hh, mm, nick, text, anick, atext = m.groups()
        minute = int(hh) * 60 + int(mm)
        if nick is not None:
            out.append((minute, nick, text))
        else:
            out.append((minute, anick, f"* {anick} {atext}"))
    return out


def links(path):
    """(earlier, later) pairs: the later message answers the earlier."""
    pairs = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2:
            a, b = int(parts[0]), int(parts[1])
            if a != b:
                pairs.append((min(a, b), max(a, b)))
    return pairs


def addressed(text, nick):
    low = text.lower()
    n = nick.lower()
    if re.match(re.escape(n) + r"\s*[:,]", low):
        return True
    return re.search(r"(^|\s)@" + re.escape(n) + r"\b", low) is not None


def main():
    folder = Path(sys.argv[1])
    out = sys.stdout
    print("# Built by scripts/eval-from-disentanglement.py from the Ubuntu IRC", file=out)
    print("# disentanglement corpus's dev split (Kummerfeld et al. 2019, CC-BY-4.0);", file=out)
    print("# see examples/eval/README.md. Do not edit by hand.", file=out)
    offset = 0
    for ascii_file in sorted(folder.glob("*.ascii.txt")):
        stem = ascii_file.name[: -len(".ascii.txt")]
        log = read_log(ascii_file)
        pairs = links(folder / f"{stem}.annotation.txt")
        answered_by = {}
        for a, b in pairs:
            answered_by.setdefault(a, set()).add(log[b][1])
        # The helper: who answered the most messages of other people.
        counts = Counter()
        for a, b in pairs:
            who, by = log[a][1], log[b][1]
            if who and by and who != by and by.lower() not in BOTS:
                counts[by] += 1
        helper = counts.most_common(1)[0][0]
        nick_word = re.compile(r"(?<![\w\-\[\]\\`^{}|])" + re.escape(helper) + r"(?![\w\-\[\]\\`^{}|])", re.I)
        room = f"ubuntu-{stem}"
        # The corpus annotates from message 1000 on: what each answers.
        start = 1000
        first = max(0, start - CONTEXT)
        day = 0
        last_minute = None
        per_minute = Counter()
        end_at = offset
        for i in range(first, len(log)):
            minute, nick, text = log[i]
            if minute is None or nick is None or nick == helper:
                continue
            if last_minute is not None and minute < last_minute:
                day += 1  # the log went past midnight
            last_minute = minute
            slot = day * 1440 + minute
            per_minute[slot] += 1
            at = offset + slot * 60 + min(per_minute[slot] - 1, 59)
            end_at = max(end_at, at)
            text = nick_word.sub("helper", text)
            line = {"at": at, "from": nick, "text": text, "room": room, "id": f"{stem}-{i}"}
            if addressed(text, "helper"):
                line["mentions"] = ["helper"]
            if nick.lower() in BOTS:
                line["bot"] = True
            elif i >= start:
                line["expect"] = {"helper": "reply" if helper in answered_by.get(i, ()) else "silent"}
            out.write(json.dumps(line) + "\n")
        # The next log starts an hour after this one ends.
        offset = end_at + 3600
        print(f"{stem}: helper is {helper} ({counts[helper]} answers)", file=sys.stderr)


if __name__ == "__main__":
    main()
