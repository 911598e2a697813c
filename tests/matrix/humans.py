"""The people in tactful's Matrix tests, played by matrix-nio.

A test starts this script and speaks JSON lines with it: one command per
line on stdin, one answer per line on stdout. Every answer is
{"ok": ...} or {"error": "..."}; the script itself never decides whether a
test passed, it only acts and reports what the homeserver holds.

Commands (all with "as": the acting user's localpart, except login):
  login     {user, password}
  create    {as, invite: [user ids], direct: bool, name} -> room id
  join      {as, room}
  send      {as, room, body, mentions: [user ids] | null, reply_to, thread}
            -> event id; mentions null leaves m.mentions out of the event
  messages  {as, room} -> the room's messages, oldest first: event_id,
            sender, body, reply_to, thread, redacted, edit_of
  members   {as, room} -> joined user ids
"""

import asyncio
import json
import sys

from nio import AsyncClient, MessageDirection, RoomMessagesError

HOMESERVER = sys.argv[1]
clients = {}


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
    client = clients[cmd["as"]]
    out, start = [], None
    while True:
        resp = await client.room_messages(
            cmd["room"], start=start, direction=MessageDirection.back, limit=100
        )
        if isinstance(resp, RoomMessagesError):
            raise RuntimeError(f"messages failed: {resp}")
        for ev in resp.chunk:
            src = ev.source
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
                }
            )
        if not resp.chunk or not resp.end or resp.end == start:
            break
        start = resp.end
    out.reverse()
    return out


async def members(cmd):
    resp = await clients[cmd["as"]].joined_members(cmd["room"])
    return [m.user_id for m in getattr(resp, "members", [])]


COMMANDS = {
    "login": login,
    "create": create,
    "join": join,
    "send": send,
    "messages": messages,
    "members": members,
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
