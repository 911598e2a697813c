#!/usr/bin/env python3
"""Prompt prefix reuse per persona, from a `tactful replay --prompts` trace.

For each persona and room, each reply or batch prompt (system text, then
the messages in order) is compared with that persona's previous prompt in
the room: the characters they share from the start count as reusable (what
a provider's prompt cache can serve). Printed: shared over total, per
persona and for all, the same sum `tactful replay --stats` prints.

    tactful replay --prompts -c CONFIG SCENARIO | scripts/prefix-reuse.py

`scripts/prefix-reuse.py --ids-differ SCENARIO > OUT` rewrites a scenario so
each sender has an account id unlike their name (as on Discord, Slack,
Telegram or Matrix), which the sender context then has to carry.
"""
import hashlib
import json
import sys
from collections import defaultdict


def flat(prompt):
    out = prompt["system"]
    for m in prompt["messages"]:
        out += "\0" + m["role"] + ":" + m["content"]
    return out


def reuse(lines):
    last, sums = {}, defaultdict(lambda: [0, 0])
    for line in lines:
        if not line.strip():
            continue
        d = json.loads(line)
        if d.get("type") != "agent_call" or d.get("kind") not in ("reply", "ambient"):
            continue
        if "prompt" not in d:
            sys.exit("no prompts in the trace: run tactful replay with --prompts")
        text, key = flat(d["prompt"]), (d["persona"], d["room"])
        if key in last:
            before, shared = last[key], 0
            for a, b in zip(before, text):
                if a != b:
                    break
                shared += 1
            sums[d["persona"]][0] += shared
            sums[d["persona"]][1] += len(text)
        last[key] = text
    total = [0, 0]
    for persona, (shared, length) in sorted(sums.items()):
        total[0] += shared
        total[1] += length
        print(f"{persona}: {100 * shared / length:.1f} %")
    if total[1]:
        print(f"all: {100 * total[0] / total[1]:.1f} %")


def ids_differ(path):
    for line in open(path, encoding="utf-8"):
        if not line.strip() or line.startswith("#"):
            sys.stdout.write(line)
            continue
        d = json.loads(line)
        d.setdefault("name", d["from"].capitalize())
        d["from"] = "U" + hashlib.sha1(d["from"].encode()).hexdigest()[:10].upper()
        sys.stdout.write(json.dumps(d) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--ids-differ":
        ids_differ(sys.argv[2])
    elif len(sys.argv) == 1:
        reuse(sys.stdin)
    else:
        sys.exit(__doc__)
