#!/usr/bin/env python3
"""A tiny tactful agent: the turn arrives as JSON on stdin, the answer goes
to stdout. Replace the logic with a call to anything you like."""
import json
import sys

turn = json.load(sys.stdin)
trigger = turn["triggers"][-1]
text = trigger["text"]

if "?" not in text:
    # Nothing was asked: stay silent (the room allows it when silence_token is set).
    print(turn["silence_token"] or "Noted.")
elif "crash" in text:
    print("the model backend is unreachable", file=sys.stderr)
    sys.exit(2)
else:
    seen = len(turn["transcript"])
    print(f"[[reply_to:{trigger['message_id']}]]")
    print(f"{trigger['sender_name']}, I read the {seen} earlier messages; the short answer is: yes.")
