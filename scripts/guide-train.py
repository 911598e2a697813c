#!/usr/bin/env python3
"""Trains the kb agent's question gate (crates/tactful-agents/src/kb/gate.json).

The gate tells a line that asks the docs something from chatter that uses
the docs' words: a logistic regression over the line's words and word
pairs, how it opens and ends, and what the kb's search made of it (its best
section's score, the best small-talk score). It learns from the sets the
Guide may be tuned on, tests/guide/labelled.jsonl, dev.jsonl, dev2.jsonl
and newcomer.jsonl (once measured, 2026-11-29), never from the frozen ones
(frozen*.jsonl, newcomer2.jsonl). Plain Python, no packages: about a
thousand lines of data.

Usage (from the repository root):
  rm -f /tmp/kb-export.jsonl
  KB_EXPORT=/tmp/kb-export.jsonl cargo test -p tactful-agents --test it set
  scripts/guide-train.py /tmp/kb-export.jsonl          # writes gate.json and gate-examples.json
  scripts/guide-train.py /tmp/kb-export.jsonl --cv     # 5-fold estimate only

The features must match kb/gate.rs's `features` exactly.
"""
import json
import math
import random
import re
import sys
from pathlib import Path

# The sets the Guide may learn from; never a frozen one.
TUNING = ("labelled.jsonl", "dev.jsonl", "dev2.jsonl", "newcomer.jsonl")
THRESHOLD = 0.6
MIN_SCORE = 2.0
EPOCHS = 60
RATE = 0.3
L2 = 1e-4


def words(text):
    return re.findall(r"[a-z0-9_']+", text.lower())


def features(r):
    w = words(r["text"])
    f = {}
    for x in w:
        f["w:" + x] = 1.0
    for a, b in zip(w, w[1:]):
        f["b:" + a + "_" + b] = 1.0
    if w:
        f["first:" + w[0]] = 1.0
    f["question"] = 1.0 if r["q"] else 0.0
    f["ends_q"] = 1.0 if r["text"].strip().endswith("?") else 0.0
    f["defined"] = 1.0 if r["defined"] else 0.0
    top = r["top"][0][1]
    chatter = r["chatter"]
    f["top"] = top / 10
    f["chatter"] = chatter / 10
    f["ratio"] = min(top / (chatter + 0.5), 5) / 5
    f["ident"] = 1.0 if re.search(r"[_`=]|\b[a-z]+\.[a-z]+\b", r["text"]) else 0.0
    f["len"] = min(len(w), 30) / 30
    f["near_chatter"] = min(r.get("near_chatter", 0.0), 40) / 20
    f["bias"] = 1.0
    return f


def prob(weights, x):
    z = sum(weights.get(k, 0.0) * v for k, v in x.items())
    return 1 / (1 + math.exp(-max(min(z, 30), -30)))


def train(rows):
    rng = random.Random(1)
    xs = [features(r) for r in rows]
    ys = [1.0 if r["want"] else 0.0 for r in rows]
    weights = {}
    order = list(range(len(rows)))
    for _ in range(EPOCHS):
        rng.shuffle(order)
        for i in order:
            g = prob(weights, xs[i]) - ys[i]
            for k, v in xs[i].items():
                w = weights.get(k, 0.0)
                weights[k] = w - RATE * (g * v + L2 * w)
    return weights


def answered(weights, r):
    return prob(weights, features(r)) > THRESHOLD and r["top"][0][1] >= MIN_SCORE


def cv(rows):
    """5-fold held-out figures per set."""
    texts = sorted({r["text"] for r in rows})
    random.Random(1).shuffle(texts)
    fold = {t: i % 5 for i, t in enumerate(texts)}
    per = {}
    for k in range(5):
        weights = train([r for r in rows if fold[r["text"]] != k])
        for r in (r for r in rows if fold[r["text"]] == k):
            s = per.setdefault(r["set"], [0, 0, 0, 0])
            a = answered(weights, r)
            if r["want"]:
                s[0] += 1
                s[1] += a and r.get("pick", r["top"][0][0]) in r["want"]
            else:
                s[2] += 1
                s[3] += not a
    for name, (q, right, c, quiet) in sorted(per.items()):
        print(f"  {name}: {right}/{q} questions right ({right / q:.1%}), {quiet}/{c} chatter left alone ({quiet / c:.1%})")


def main():
    rows = [json.loads(l) for l in open(sys.argv[1])]
    rows = [r for r in rows if r["set"] in TUNING]
    here = Path(__file__).resolve().parent.parent / "crates/tactful-agents/src/kb"
    # Example questions raise the search's scores: a kb with them gets a
    # model of its own, so one without keeps what it had.
    for examples, name in ((False, "gate.json"), (True, "gate-examples.json")):
        mine = [r for r in rows if r.get("examples", False) == examples]
        if not mine:
            continue
        if "--cv" in sys.argv:
            print(f"{name} (kb {'with' if examples else 'without'} example questions), held out:")
            cv(mine)
            continue
        weights = train(mine)
        kept = {k: round(v, 4) for k, v in sorted(weights.items()) if abs(v) >= 1e-3}
        out = {"threshold": THRESHOLD, "min_score": MIN_SCORE, "weights": kept}
        (here / name).write_text(json.dumps(out, indent=0, ensure_ascii=False) + "\n")
        print(f"{len(kept)} weights from {len(mine)} lines -> {here / name}")


if __name__ == "__main__":
    main()
