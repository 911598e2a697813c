#!/usr/bin/env python3
"""Trains the kb agent's question gate (crates/tactful-agents/src/kb/gate.json).

The gate tells a line that asks the docs something from chatter that uses
the docs' words: a logistic regression over the line's words and word
pairs, how it opens and ends, and what the kb's search made of it (its best
section's score, the best small-talk score). It learns from the sets the
Guide may be tuned on, those tests/guide/tuning.txt lists, never from the
frozen ones (the other sets there). Plain Python, no packages: about a
thousand lines of data.

It also trains the model that says whether the Guide may answer a
question from its best section or should say it is not sure
(crates/tactful-agents/src/kb/sure.json, read by kb/doubt.rs): a logistic
regression over the features kb/doubt.rs exports, learning whether the
best section was a right answer.

Usage (from the repository root):
  rm -f /tmp/kb-export.jsonl
  KB_EXPORT=/tmp/kb-export.jsonl cargo test -p tactful-agents --test it kb
  scripts/guide-train.py /tmp/kb-export.jsonl          # writes gate.json and gate-examples.json
  scripts/guide-train.py /tmp/kb-export.jsonl --cv     # 5-fold estimate only
  scripts/guide-train.py /tmp/kb-export.jsonl --sure   # writes sure.json
  scripts/guide-train.py /tmp/kb-export.jsonl --sure --cv   # each set held out in turn

The gate's features must match kb/gate.rs's `features` exactly; the
sureness model's are exported as they are.
"""
import json
import math
import random
import re
import sys
from pathlib import Path

# The sets the Guide may learn from; never a frozen one.
TUNING = tuple(
    line.strip()
    for line in (Path(__file__).resolve().parent.parent / "tests/guide/tuning.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)
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


def logistic(z):
    return 1 / (1 + math.exp(-max(min(z, 30), -30)))


def prob(weights, x):
    return logistic(sum(weights.get(k, 0.0) * v for k, v in x.items()))


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


# The sureness model: how likely the best section is a right answer; at
# or above SURE the Guide answers from it. SURE was chosen on the tuning
# sets with each set held out in turn (--sure --cv): the lowest that keeps
# the newcomers' sets' confident wrong answers under 10 %.
SURE = 0.7
# kb/unsure.rs's SURE_MARGIN: the model only adds doubt to it.
MARGIN = 1.1
SURE_STEPS = 12
SURE_L2 = 1e-3


def is_question(r):
    kind = r.get("kind")
    return kind == "question" or (kind is None and bool(r["want"]))


def sure_rows(rows):
    """The questions the model learns from: all but those a named setting's
    section answers (the model is not asked about them)."""
    out = []
    for r in rows:
        if not is_question(r) or not r["top"] or r.get("answered_by_setting", False):
            continue
        out.append((r["sure"], 1.0 if r["pick"] in r["want"] else 0.0, r))
    return out


def solve(a, b):
    """x with a·x = b, by Gaussian elimination with partial pivoting."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            if f:
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    x = [0.0] * n
    for c in range(n - 1, -1, -1):
        x[c] = (m[c][n] - sum(m[c][k] * x[k] for k in range(c + 1, n))) / m[c][c]
    return x


def sure_train(data):
    """Newton's method on the L2-penalised log loss: the same weights
    whatever the order of the data, in a few steps (the features are a
    few dozen, all of them on every line)."""
    keys = sorted({k for x, _, _ in data for k in x})
    xs = [[x.get(k, 0.0) for k in keys] for x, _, _ in data]
    ys = [y for _, y, _ in data]
    n, d = len(xs), len(keys)
    w = [0.0] * d
    for _ in range(SURE_STEPS):
        grad = [SURE_L2 * n * wi for wi in w]
        hess = [[SURE_L2 * n if i == j else 0.0 for j in range(d)] for i in range(d)]
        for x, y in zip(xs, ys):
            p = logistic(sum(wi * xi for wi, xi in zip(w, x)))
            for i in range(d):
                grad[i] += (p - y) * x[i]
                if x[i]:
                    pxi = p * (1 - p) * x[i]
                    row = hess[i]
                    for j in range(d):
                        row[j] += pxi * x[j]
        step = solve(hess, grad)
        w = [wi - si for wi, si in zip(w, step)]
    return dict(zip(keys, w))


def outcome(r, sure):
    """right, unsure (a right link among the not-sure answer's), wrong, or
    missed, as tests/guide's scoring counts it (heard in a batch, a line the
    gate turns away gets nothing)."""
    want = r["want"]
    if r.get("answers") is False:
        return "missed" if want else "right"
    scores = [score for _, score in r["top"]] + [0.0, 0.0]
    if sure and scores[0] > scores[1] and scores[0] >= MARGIN * scores[1]:
        return "right" if want and r["pick"] in want else "wrong"
    if not want:
        return "right"
    links = [n for i, (n, score) in enumerate(r["top"]) if i == 0 or (score > 0 and score >= scores[0] / 2)][:3]
    return "unsure" if any(n in want for n in links) else "missed"


def sure_cv(rows):
    """Each tuning set held out in turn: its figures at several thresholds."""
    data = sure_rows(rows)
    sets = sorted({r["set"] for _, _, r in data})
    held = {s: sure_train([d for d in data if d[2]["set"] != s]) for s in sets}
    for threshold in (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9):
        print(f"threshold {threshold}:")
        groups = [(s, lambda r, s=s: r["set"] == s) for s in sets]
        groups.append(("all newcomers'", lambda r: r["set"].startswith("newcomer")))
        for name, member in groups:
            tally = {"right": 0, "unsure": 0, "wrong": 0, "missed": 0}
            for x, _, r in data:
                if member(r) and r["examples"]:
                    tally[outcome(r, prob(held[r["set"]], x) >= threshold)] += 1
            n = sum(tally.values()) or 1
            print(
                f"  {name}: {n} questions, right {tally['right'] / n:.1%}, "
                f"right or unsure {(tally['right'] + tally['unsure']) / n:.1%}, wrong {tally['wrong'] / n:.1%}"
            )


def main():
    rows = [json.loads(l) for l in open(sys.argv[1])]
    rows = [r for r in rows if r["set"] in TUNING]
    for name in TUNING:
        if not any(r["set"] == name for r in rows):
            print(f"warning: no line of {name} in the export (is tests/guide/tuning.txt right?)", file=sys.stderr)
    # The tests append lines as they finish, in no set order; sorted, the
    # same export trains the same weights.
    rows.sort(key=lambda r: (r["set"], r["text"], r.get("examples", False)))
    here = Path(__file__).resolve().parent.parent / "crates/tactful-agents/src/kb"
    if "--sure" in sys.argv:
        if "--cv" in sys.argv:
            sure_cv(rows)
            return
        data = sure_rows(rows)
        if not data:
            sys.exit("no questions to learn from: is the export from the kb tests, with KB_EXPORT set?")
        weights = sure_train(data)
        kept = {k: round(v, 4) for k, v in sorted(weights.items())}
        # Each signal's range in training: kb/doubt.rs reads a value
        # beyond it at its edge.
        signals = sorted({k for x, _, _ in data for k in x})
        span = {k: [min(x.get(k, 0.0) for x, _, _ in data), max(x.get(k, 0.0) for x, _, _ in data)] for k in signals}
        out = {"threshold": SURE, "weights": kept, "range": span}
        (here / "sure.json").write_text(json.dumps(out, indent=0) + "\n")
        print(f"{len(kept)} weights from {len(data)} questions -> {here / 'sure.json'}")
        return
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
