#!/usr/bin/env python3
"""A before-send hook: reads one reply as JSON on stdin, answers one JSON line.

It rewrites, cancels or passes a reply by what it says; and, to show what
tactful does with a hook that misbehaves, it can hang, print garbage or
print without end.
"""
import json
import sys
import time

reply = json.load(sys.stdin)
text = reply["text"]

if "shout" in text:
    print(json.dumps({"action": "replace", "text": text.upper()}))
elif "lottery" in text:
    print(json.dumps({"action": "cancel", "reason": "off topic for this room"}))
elif "slowly" in text:
    time.sleep(30)
elif "garbled" in text:
    print("certainly! here is my verdict: send it")
elif "endless" in text:
    chunk = "x" * 65536
    for _ in range(800):  # 50 MiB, if nobody stops it
        sys.stdout.write(chunk)
else:
    print(json.dumps({"action": "send"}))
