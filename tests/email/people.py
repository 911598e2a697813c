"""The people in tactful's email tests: Python's own smtplib and imaplib.

A test starts this script and speaks JSON lines with it: one command per
line on stdin, one answer per line on stdout, {"ok": ...} or
{"error": "..."}. The script only acts and reports what the mailboxes
hold; the test decides what that means.

Usage: people.py SMTP_PORT IMAP_PORT (Postfix and Dovecot on 127.0.0.1,
domain example.org, each user's password "pw-<user>").

Commands:
  send  {from, to: [..], cc: [..], subject, body, id, in_reply_to,
        references, headers: {name: value}}: a plain text mail (UTF-8)
        from <from>@example.org, to the addresses given -> its Message-ID
  raw   {from, to: [..], data}: `data` (latin-1 code points) sent as the
        mail's bytes, as they are (broken mail); from "" is the null
        sender of a bounce
  big   {from, to: [..], subject, body, megabytes}: a mail with an
        attachment of that size
  append {user, data, days_ago}: `data` put straight into <user>'s INBOX
        over IMAP, dated that many days back (mail that arrived long ago)
  inbox {user} -> every mail in <user>'s INBOX: uid, from, to, cc,
        subject, message_id, in_reply_to, references, auto_submitted,
        content_type, list_id, body (decoded text), header_names
"""

import email
import email.policy
import imaplib
import json
import smtplib
import sys
from email.message import EmailMessage
from email.utils import make_msgid

SMTP_PORT = int(sys.argv[1])
IMAP_PORT = int(sys.argv[2])
DOMAIN = "example.org"


def addr(user):
    return user if "@" in user else f"{user}@{DOMAIN}"


def submit(sender, rcpts, data):
    # An empty sender is the null return path (MAIL FROM:<>) of a bounce.
    with smtplib.SMTP("127.0.0.1", SMTP_PORT, timeout=60) as s:
        s.sendmail(addr(sender) if sender else "", [addr(r) for r in rcpts], data)


def send(c):
    m = EmailMessage()
    m["From"] = c.get("from_header") or addr(c["from"])
    if c.get("to"):
        m["To"] = ", ".join(addr(t) for t in c["to"])
    if c.get("cc"):
        m["Cc"] = ", ".join(addr(t) for t in c["cc"])
    m["Subject"] = c.get("subject", "")
    mid = c.get("id") or make_msgid(domain=DOMAIN)
    m["Message-ID"] = mid
    if c.get("in_reply_to"):
        m["In-Reply-To"] = c["in_reply_to"]
    if c.get("references"):
        m["References"] = c["references"]
    for k, v in (c.get("headers") or {}).items():
        m[k] = v
    m.set_content(c.get("body", ""))
    submit(c["from"], c.get("to", []) + c.get("cc", []), m.as_bytes())
    return mid


def big(c):
    m = EmailMessage()
    m["From"] = addr(c["from"])
    m["To"] = ", ".join(addr(t) for t in c["to"])
    m["Subject"] = c.get("subject", "")
    mid = make_msgid(domain=DOMAIN)
    m["Message-ID"] = mid
    m.set_content(c.get("body", ""))
    m.add_attachment(b"\x00" * (c["megabytes"] << 20), maintype="application", subtype="octet-stream", filename="big.bin")
    submit(c["from"], c["to"], m.as_bytes())
    return mid


def append(c):
    import time
    user = c["user"]
    im = imaplib.IMAP4("127.0.0.1", IMAP_PORT)
    try:
        im.login(addr(user), f"pw-{user}")
        when = imaplib.Time2Internaldate(time.time() - 86400 * c.get("days_ago", 0))
        typ, data = im.append("INBOX", None, when, c["data"].encode("latin-1"))
        if typ != "OK":
            raise RuntimeError(f"APPEND: {data}")
    finally:
        im.logout()
    return True


def inbox(c):
    user = c["user"]
    out = []
    im = imaplib.IMAP4("127.0.0.1", IMAP_PORT)
    try:
        im.login(addr(user), f"pw-{user}")
        im.select("INBOX", readonly=True)
        typ, data = im.uid("SEARCH", None, "ALL")
        uids = data[0].split() if data and data[0] else []
        for uid in uids:
            typ, parts = im.uid("FETCH", uid, "(BODY.PEEK[]<0.2000000>)")
            raw = next(p[1] for p in parts if isinstance(p, tuple))
            m = email.message_from_bytes(raw, policy=email.policy.default)
            body = ""
            try:
                part = m.get_body(preferencelist=("plain",))
                body = part.get_content() if part is not None else ""
            except Exception as e:  # broken mail: say so, do not fail
                body = f"<unreadable: {e}>"
            out.append({
                "uid": int(uid),
                "from": str(m.get("From", "")),
                "to": str(m.get("To", "")),
                "cc": str(m.get("Cc", "")),
                "subject": str(m.get("Subject", "")),
                "message_id": str(m.get("Message-ID", "")),
                "in_reply_to": str(m.get("In-Reply-To", "")),
                "references": str(m.get("References", "")),
                "auto_submitted": str(m.get("Auto-Submitted", "")),
                "content_type": str(m.get("Content-Type", "")),
                "list_id": str(m.get("List-Id", "")),
                "body": body.replace("\r\n", "\n"),
                "header_names": [k.lower() for k in m.keys()],
            })
    finally:
        try:
            im.logout()
        except Exception:
            pass
    return out


def main():
    for line in sys.stdin:
        try:
            c = json.loads(line)
            op = c["op"]
            if op == "send":
                ok = send(c)
            elif op == "raw":
                submit(c["from"], c["to"], c["data"].encode("latin-1"))
                ok = True
            elif op == "big":
                ok = big(c)
            elif op == "append":
                ok = append(c)
            elif op == "inbox":
                ok = inbox(c)
            else:
                raise ValueError(f"unknown op {op}")
            print(json.dumps({"ok": ok}), flush=True)
        except Exception as e:
            print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)


main()
