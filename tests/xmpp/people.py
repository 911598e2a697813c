"""The people in tactful's XMPP tests, played by slixmpp.

A test starts this script and speaks JSON lines with it: one command per
line on stdin, one answer per line on stdout. Every answer is
{"ok": ...} or {"error": "..."}; the script never decides whether a test
passed, it only acts and reports what its clients received.

Usage: people.py PORT (a Prosody on 127.0.0.1:PORT, domain "localhost",
no TLS).

Commands (all with "as": the acting user's localpart, except login):
  login    {user, password}
  join     {as, room, nick}: waits until the room shows the join
  leave    {as, room}
  send     {as, room, body, mention: uri | null, reply: {to, id, quote} | null}
           -> the stanza-id the room gave the message (from its echo)
  dm       {as, to, body} -> the message's id
  raw      {as, xml}: sends the XML as it is (bad input)
  messages {as, room} -> what the room said since the join, as a client
           that applies corrections and retractions shows it: nick, body,
           stanza_id, id, reply_id, corrections, retracted, delayed
  dms      {as} -> one-to-one messages received: from, body, id, reply_id,
           corrections, retracted
  reactions {as, room} -> nick, target, emojis
  composing {as, room} -> the nicks that sent a "composing" chat state
  occupants {as, room} -> nicks present
  kick     {as, room, nick}
  invite   {as, room, to}: a mediated invitation (XEP-0045) of JID `to`
  ban      {as, room, jid}: makes `jid` an outcast of the room
"""

import asyncio
import json
import sys
import xml.etree.ElementTree as ET

import slixmpp
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import MatchXPath

PORT = int(sys.argv[1])
DOMAIN = "localhost"
clients = {}

NS_SID = "urn:xmpp:sid:0"
NS_REPLY = "urn:xmpp:reply:0"
NS_FALLBACK = "urn:xmpp:fallback:0"
NS_CORRECT = "urn:xmpp:message-correct:0"
NS_RETRACT = "urn:xmpp:message-retract:1"
NS_REACTIONS = "urn:xmpp:reactions:0"
NS_STATES = "http://jabber.org/protocol/chatstates"
NS_REF = "urn:xmpp:reference:0"
NS_DELAY = "urn:xmpp:delay"


def child(xml, name, ns):
    return xml.find("{%s}%s" % (ns, name))


class Person(slixmpp.ClientXMPP):
    def __init__(self, jid, password):
        super().__init__(jid, password)
        self.enable_plaintext = True
        self.enable_starttls = False
        self.enable_direct_tls = False
        self.plugin["feature_mechanisms"].unencrypted_plain = True
        self.plugin["feature_mechanisms"].unencrypted_scram = True
        self.register_plugin("xep_0030")
        self.register_plugin("xep_0045")
        self.register_plugin("xep_0199")
        self.rooms = {}  # room -> list of message records
        self.reactions = {}  # room -> list
        self.composing = {}  # room -> set of nicks
        self.direct = []
        self.echoes = {}  # origin id -> future of stanza-id
        self.online = asyncio.get_event_loop().create_future()
        self.add_event_handler("session_start", self.started)
        # Every message stanza, with a body or not (slixmpp's "message"
        # event skips those without: chat states, reactions).
        self.register_handler(Callback("every message", MatchXPath("{jabber:client}message"), self.got))
        self.add_event_handler("failed_auth", lambda _: self.online.done() or self.online.set_exception(RuntimeError("auth failed")))

    async def started(self, _):
        self.send_presence()
        if not self.online.done():
            self.online.set_result(True)

    def got(self, msg):
        xml = msg.xml
        kind = msg["type"]
        frm = msg["from"]
        sid = child(xml, "stanza-id", NS_SID)
        origin = child(xml, "origin-id", NS_SID)
        reply = child(xml, "reply", NS_REPLY)
        replace = child(xml, "replace", NS_CORRECT)
        retract = child(xml, "retract", NS_RETRACT)
        reactions = child(xml, "reactions", NS_REACTIONS)
        body = msg["body"]
        if kind == "groupchat":
            room = frm.bare
            nick = frm.resource
            if origin is not None and origin.get("id") in self.echoes:
                fut = self.echoes.pop(origin.get("id"))
                if not fut.done():
                    fut.set_result(sid.get("id") if sid is not None else None)
            if any(child(xml, s, NS_STATES) is not None for s in ["composing"]):
                self.composing.setdefault(room, set()).add(nick)
            records = self.rooms.setdefault(room, [])
            if reactions is not None:
                self.reactions.setdefault(room, []).append(
                    {"nick": nick, "target": reactions.get("id"), "emojis": [r.text for r in reactions]}
                )
                return
            self.record(records, nick, body, xml, sid, reply, replace, retract)
        elif kind in ("chat", "normal"):
            if reactions is not None or not body and replace is None and retract is None:
                return
            self.record(self.direct, frm.bare, body, xml, sid, reply, replace, retract)

    def record(self, records, who, body, xml, sid, reply, replace, retract):
        if replace is not None:
            for r in records:
                if r["id"] == replace.get("id") and r["who"] == who:
                    r["body"] = body
                    r["corrections"] += 1
            return
        if retract is not None:
            for r in records:
                if (r["stanza_id"] == retract.get("id") or r["id"] == retract.get("id")) and r["who"] == who:
                    r["retracted"] = True
            return
        if not body:
            return
        records.append(
            {
                "who": who,
                "body": body,
                "stanza_id": sid.get("id") if sid is not None else None,
                "id": xml.get("id"),
                "reply_id": reply.get("id") if reply is not None else None,
                "reply_to": reply.get("to") if reply is not None else None,
                "corrections": 0,
                "retracted": False,
                "delayed": child(xml, "delay", NS_DELAY) is not None,
            }
        )


async def login(cmd):
    p = Person(f"{cmd['user']}@{DOMAIN}", cmd["password"])
    p.connect(host="127.0.0.1", port=PORT)
    await asyncio.wait_for(p.online, 20)
    clients[cmd["user"]] = p
    return True


async def join(cmd):
    p = clients[cmd["as"]]
    p.rooms.setdefault(cmd["room"], [])
    await asyncio.wait_for(p.plugin["xep_0045"].join_muc_wait(cmd["room"], cmd["nick"], maxstanzas=0), 20)
    return True


async def leave(cmd):
    p = clients[cmd["as"]]
    p.plugin["xep_0045"].leave_muc(cmd["room"], p.plugin["xep_0045"].get_our_jid_in_room(cmd["room"]).split("/")[-1])
    return True


async def send(cmd):
    p = clients[cmd["as"]]
    msg = p.make_message(mto=cmd["room"], mtype="groupchat")
    origin = f"t-{id(msg)}-{len(p.echoes)}-{asyncio.get_event_loop().time()}"
    msg["id"] = origin
    body = cmd["body"]
    reply = cmd.get("reply")
    if reply:
        ET.SubElement(msg.xml, "{%s}reply" % NS_REPLY, {"to": reply["to"], "id": reply["id"]})
        if reply.get("quote"):
            quoted = "> " + reply["quote"] + "\n"
            body = quoted + body
            fb = ET.SubElement(msg.xml, "{%s}fallback" % NS_FALLBACK, {"for": NS_REPLY})
            ET.SubElement(fb, "{%s}body" % NS_FALLBACK, {"start": "0", "end": str(len(quoted))})
    msg["body"] = body
    if cmd.get("mention"):
        ET.SubElement(msg.xml, "{%s}reference" % NS_REF, {"type": "mention", "uri": cmd["mention"], "begin": "0", "end": "1"})
    ET.SubElement(msg.xml, "{%s}origin-id" % NS_SID, {"id": origin})
    fut = asyncio.get_event_loop().create_future()
    p.echoes[origin] = fut
    msg.send()
    return await asyncio.wait_for(fut, 20)


async def dm(cmd):
    p = clients[cmd["as"]]
    msg = p.make_message(mto=cmd["to"], mtype="chat", mbody=cmd["body"])
    msg["id"] = f"d-{asyncio.get_event_loop().time()}"
    msg.send()
    return msg["id"]


async def raw(cmd):
    p = clients[cmd["as"]]
    p.send_raw(cmd["xml"])
    return True


def cleaned(records):
    return [{k: v for k, v in r.items()} for r in records]


async def messages(cmd):
    p = clients[cmd["as"]]
    return [dict(r, nick=r["who"]) for r in p.rooms.get(cmd["room"], [])]


async def dms(cmd):
    p = clients[cmd["as"]]
    return [dict(r, **{"from": r["who"]}) for r in p.direct]


async def reactions(cmd):
    p = clients[cmd["as"]]
    return p.reactions.get(cmd["room"], [])


async def composing(cmd):
    p = clients[cmd["as"]]
    return sorted(p.composing.get(cmd["room"], set()))


async def occupants(cmd):
    p = clients[cmd["as"]]
    return sorted(p.plugin["xep_0045"].get_roster(cmd["room"]) or [])


async def invite(cmd):
    p = clients[cmd["as"]]
    p.plugin["xep_0045"].invite(cmd["room"], cmd["to"], reason="join us")
    return True


async def ban(cmd):
    p = clients[cmd["as"]]
    await p.plugin["xep_0045"].set_affiliation(cmd["room"], "outcast", jid=cmd["jid"], reason="test ban")
    return True


async def kick(cmd):
    p = clients[cmd["as"]]
    await p.plugin["xep_0045"].set_role(cmd["room"], cmd["nick"], "none", reason="test kick")
    return True


OPS = {
    "login": login,
    "join": join,
    "leave": leave,
    "send": send,
    "dm": dm,
    "raw": raw,
    "messages": messages,
    "dms": dms,
    "reactions": reactions,
    "composing": composing,
    "occupants": occupants,
    "kick": kick,
    "invite": invite,
    "ban": ban,
}


async def main():
    loop = asyncio.get_event_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            break
        try:
            cmd = json.loads(line)
            answer = {"ok": await OPS[cmd["op"]](cmd)}
        except Exception as e:  # reported to the test, which fails with it
            answer = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


asyncio.run(main())
