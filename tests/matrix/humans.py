"""The people in tactful's Matrix tests, played by matrix-nio.

A test starts this script and speaks JSON lines with it: one command per
line on stdin, one answer per line on stdout. Every answer is
{"ok": ...} or {"error": "..."}; the script itself never decides whether a
test passed, it only acts and reports what the homeserver holds.

Commands (all with "as": the acting user's localpart, except the first two):
  register  {user, password, secret}: a new account, by shared secret
  login     {user, password}
  create    {as, invite: [user ids], direct: bool, name} -> room id
  join      {as, room}
  send      {as, room, body, mentions: [user ids] | null, reply_to, thread}
            -> event id; mentions null leaves m.mentions out of the event
  messages  {as, room} -> the room's messages as a client shows them,
            oldest first (edits applied): event_id, sender, body, reply_to,
            thread, redacted, mentions
  members   {as, room} -> joined user ids
  reactions {as, room} -> the room's m.reaction annotations: sender,
            target (the event reacted to), key (the emoji)
"""

import asyncio
import json
import sys

from nio import AsyncClient

HOMESERVER = sys.argv[1]
clients = {}


async def register(cmd):
    """Registers a user with the homeserver's shared secret (Synapse's admin
    API, as its register_new_matrix_user does, without a process each)."""
    import hashlib
    import hmac
    import urllib.request

    url = f"{HOMESERVER}/_synapse/admin/v1/register"
    with urllib.request.urlopen(url) as r:
        nonce = json.load(r)["nonce"]
    mac = hmac.new(cmd["secret"].encode(), digestmod=hashlib.sha1)
    mac.update(f"{nonce}\0{cmd['user']}\0{cmd['password']}\0notadmin".encode())
    body = json.dumps(
        {"nonce": nonce, "username": cmd["user"], "password": cmd["password"], "admin": False, "mac": mac.hexdigest()}
    ).encode()
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)["user_id"]


async def login(cmd):
    client = AsyncClient(HOMESERVER, f"@{cmd['user']}:{cmd.get('server', 'localhost')}")
    resp = await client.login(cmd["password"], device_name="tactful test")
    if not getattr(resp, "access_token", None):
        raise RuntimeError(f"login failed: {resp}")
    clients[cmd["user"]] = client
    return client.user_id


async def create(cmd):
    client = clients[cmd["as"]]
    resp = await client.room_create(
        name=cmd.get("name"),
        invite=cmd.get("invite", []),
        is_direct=cmd.get("direct", False),
        room_version="12",
    )
    if not getattr(resp, "room_id", None):
        raise RuntimeError(f"room_create failed: {resp}")
    return resp.room_id


async def join(cmd):
    resp = await clients[cmd["as"]].join(cmd["room"])
    if not getattr(resp, "room_id", None):
        raise RuntimeError(f"join failed: {resp}")
    return resp.room_id


async def send(cmd):
    content = {"msgtype": "m.text", "body": cmd["body"]}
    if cmd.get("mentions") is not None:
        content["m.mentions"] = {"user_ids": cmd["mentions"]}
    if cmd.get("thread"):
        content["m.relates_to"] = {"rel_type": "m.thread", "event_id": cmd["thread"]}
    elif cmd.get("reply_to"):
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": cmd["reply_to"]}}
    resp = await clients[cmd["as"]].room_send(cmd["room"], "m.room.message", content)
    if not getattr(resp, "event_id", None):
        raise RuntimeError(f"send failed: {resp}")
    return resp.event_id


async def messages(cmd):
    # What the homeserver holds, read over the client-server API with the
    # person's own token (newest first, then reversed).
    import urllib.parse
    import urllib.request

    client = clients[cmd["as"]]
    room = urllib.parse.quote(cmd["room"], safe="")
    out, start = [], None
    while True:
        query = {"dir": "b", "limit": "100"}
        if start:
            query["from"] = start
        url = f"{HOMESERVER}/_matrix/client/v3/rooms/{room}/messages?{urllib.parse.urlencode(query)}"
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {client.access_token}"})
        with urllib.request.urlopen(req) as r:
            page = json.load(r)
        for src in page.get("chunk", []):
            if src.get("type") != "m.room.message":
                continue
            content = src.get("content", {})
            rel = content.get("m.relates_to", {})
            out.append(
                {
                    "event_id": src["event_id"],
                    "sender": src["sender"],
                    "body": content.get("body"),
                    "reply_to": rel.get("m.in_reply_to", {}).get("event_id"),
                    "thread": rel.get("event_id") if rel.get("rel_type") == "m.thread" else None,
                    "redacted": "redacted_because" in src.get("unsigned", {}) or not content,
                    "edit_of": rel.get("event_id") if rel.get("rel_type") == "m.replace" else None,
                    "mentions": content.get("m.mentions", {}).get("user_ids", []),
                    "new_body": content.get("m.new_content", {}).get("body"),
                    "formatted_body": content.get("formatted_body"),
                    "format": content.get("format"),
                    "new_formatted_body": content.get("m.new_content", {}).get("formatted_body"),
                }
            )
        if not page.get("chunk") or not page.get("end"):
            break
        start = page["end"]
    out.reverse()
    # As a client shows them: an edit replaces its original's text (the
    # latest edit wins) and is not a message of its own.
    # Each message also lists its edits as they were sent (fallback and new
    # content), for the checks on what clients that do not apply edits see.
    by_id = {m["event_id"]: m for m in out}
    for m in out:
        m["edits"] = []
    for m in out:
        if m["edit_of"] in by_id and m["new_body"] is not None:
            original = by_id[m["edit_of"]]
            original["edits"].append(
                {
                    "body": m["body"],
                    "formatted_body": m["formatted_body"],
                    "new_body": m["new_body"],
                    "new_formatted_body": m["new_formatted_body"],
                }
            )
            original["body"] = m["new_body"]
            original["formatted_body"] = m["new_formatted_body"]
    return [m for m in out if not m["edit_of"]]


async def reactions(cmd):
    # The m.reaction events the homeserver holds, read like messages.
    import urllib.parse
    import urllib.request

    client = clients[cmd["as"]]
    room = urllib.parse.quote(cmd["room"], safe="")
    url = f"{HOMESERVER}/_matrix/client/v3/rooms/{room}/messages?dir=b&limit=200"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {client.access_token}"})
    with urllib.request.urlopen(req) as r:
        page = json.load(r)
    out = []
    for src in page.get("chunk", []):
        rel = src.get("content", {}).get("m.relates_to", {})
        if src.get("type") == "m.reaction" and rel.get("rel_type") == "m.annotation":
            out.append({"sender": src["sender"], "target": rel.get("event_id"), "key": rel.get("key")})
    return out


async def members(cmd):
    resp = await clients[cmd["as"]].joined_members(cmd["room"])
    return [m.user_id for m in getattr(resp, "members", [])]


COMMANDS = {
    "register": register,
    "login": login,
    "create": create,
    "join": join,
    "send": send,
    "messages": messages,
    "members": members,
    "reactions": reactions,
}


async def main():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        try:
            cmd = json.loads(line)
            answer = {"ok": await COMMANDS[cmd["op"]](cmd)}
        except Exception as e:  # reported to the test, which fails with it
            answer = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    for client in clients.values():
        await client.close()


asyncio.run(main())
