"""The Zulip double, checked by Zulip's own Python client (PyPI `zulip`)
and against the fields Zulip's API description (`zulip.yaml`) gives the
answers and events tactful reads. Run by
crates/tactful/tests/zulip_client.rs:

    python check.py <site> <person's email> <person's key> <bot's email> <bot's key>

Prints one line per check; exits non-zero on the first that fails.
"""

import sys
import threading

import zulip

site, person_email, person_key, bot_email, bot_key = sys.argv[1:6]


def fail(what):
    print(f"FAIL {what}", flush=True)
    sys.exit(1)


def ok(what):
    print(f"ok {what}", flush=True)


# The fields zulip.yaml gives, with the JSON kind of each (`int` also
# takes a float where the description says a number).
KINDS = {"str": str, "int": int, "bool": bool, "list": list, "dict": dict}

SUCCESS = {"result": "str", "msg": "str"}
ERROR = {"result": "str", "msg": "str", "code": "str"}
USER_ME = {
    "avatar_version": "int", "email": "str", "full_name": "str", "is_admin": "bool",
    "is_owner": "bool", "is_billing_admin": "bool", "role": "int", "is_guest": "bool",
    "is_bot": "bool", "is_active": "bool", "timezone": "str", "date_joined": "str",
    "user_id": "int", "delivery_email": "str", "profile_data": "dict",
}
REGISTER = {"queue_id": "str", "last_event_id": "int", "zulip_feature_level": "int", "zulip_version": "str"}
REGISTER_MESSAGE = {"max_message_id": "int"}
REGISTER_REALM = {"max_message_length": "int"}
MESSAGE = {
    "client": "str", "content": "str", "content_type": "str", "id": "int", "is_me_message": "bool",
    "reactions": "list", "recipient_id": "int", "sender_email": "str", "sender_full_name": "str",
    "sender_id": "int", "sender_realm_str": "str", "subject": "str", "submessages": "list",
    "timestamp": "int", "topic_links": "list", "type": "str",
}
RECIPIENT = {"id": "int", "email": "str", "full_name": "str", "is_mirror_dummy": "bool"}
MESSAGES = {"messages": "list", "found_newest": "bool", "found_oldest": "bool", "found_anchor": "bool", "history_limited": "bool"}
UPDATE_MESSAGE = {
    "type": "str", "id": "int", "message_id": "int", "message_ids": "list", "flags": "list",
    "edit_timestamp": "int", "rendering_only": "bool",
}


def shaped(what, value, fields):
    if not isinstance(value, dict):
        fail(f"{what} is not an object: {value!r}")
    for field, kind in fields.items():
        if field not in value:
            fail(f"{what} has no {field} (zulip.yaml gives it): {value!r}")
        want = KINDS[kind]
        got = value[field]
        if want is int and isinstance(got, bool):
            fail(f"{what}.{field} is a bool, zulip.yaml says {kind}")
        if not isinstance(got, want):
            fail(f"{what}.{field} is {type(got).__name__}, zulip.yaml says {kind}")


def succeeded(what, answer, fields=None):
    shaped(what, answer, SUCCESS)
    if answer["result"] != "success":
        fail(f"{what}: {answer!r}")
    if fields:
        shaped(what, answer, fields)
    return answer


def refused(what, answer, code):
    shaped(what, answer, ERROR)
    if answer["result"] != "error" or answer["code"] != code:
        fail(f"{what}: wanted {code}, got {answer!r}")
    ok(what)


# The client asks the server's settings as it is made.
person = zulip.Client(email=person_email, api_key=person_key, site=site, retry_on_errors=False)
bot = zulip.Client(email=bot_email, api_key=bot_key, site=site, retry_on_errors=False)
if not person.zulip_version or person.feature_level < 1:
    fail(f"server_settings: version {person.zulip_version!r}, feature level {person.feature_level!r}")
ok("server settings")

me = succeeded("users/me", person.get_profile(), USER_ME)
bot_me = succeeded("users/me (bot)", bot.get_profile(), USER_ME)
if not bot_me["is_bot"] or me["is_bot"]:
    fail("is_bot is wrong")
subs = succeeded("subscriptions", bot.get_subscriptions(), {"subscriptions": "list"})
general = next((s for s in subs["subscriptions"] if s["name"] == "general"), None)
if general is None or not isinstance(general.get("stream_id"), int):
    fail(f"the bot's subscriptions lack general: {subs!r}")
ok("users/me and subscriptions")

# A queue, a message heard on it, the longest message.
reg = succeeded("register", bot.register(event_types=["message", "update_message"], fetch_event_types=["message", "realm"], apply_markdown=False), REGISTER)
shaped("register (message)", reg, REGISTER_MESSAGE)
shaped("register (realm)", reg, REGISTER_REALM)
sent = succeeded(
    "a stream message",
    person.send_message({"type": "stream", "to": "general", "topic": "checks", "content": f"@**{bot_me['full_name']}** checked by the zulip client"}),
    {"id": "int"},
)
events = succeeded("events", bot.get_events(queue_id=reg["queue_id"], last_event_id=reg["last_event_id"]), {"events": "list"})
message_events = [e for e in events["events"] if e.get("type") == "message"]
if not message_events:
    fail(f"no message event: {events!r}")
event = message_events[0]
shaped("a message event", event, {"id": "int", "type": "str", "message": "dict", "flags": "list"})
shaped("a message event's message", event["message"], MESSAGE)
if event["message"]["id"] != sent["id"] or "mentioned" not in event["flags"]:
    fail(f"the event is not the message sent, with its mention: {event!r}")
if event["message"]["content"] != f"@**{bot_me['full_name']}** checked by the zulip client":
    fail("apply_markdown=false gives the text as written")
ok("register, send, a message event with its mention")

# Editing, moving and reacting.
answer = succeeded("the bot answers", bot.send_message({"type": "stream", "to": general["stream_id"], "topic": "checks", "content": "an answer"}), {"id": "int"})
succeeded("the bot edits its answer", bot.update_message({"message_id": answer["id"], "content": "an answer, edited"}))
refused("editing someone else's message", bot.update_message({"message_id": sent["id"], "content": "mine now"}), "BAD_REQUEST")
succeeded("a reaction", bot.add_reaction({"message_id": sent["id"], "emoji_name": "eyes"}))
refused("the same reaction again", bot.add_reaction({"message_id": sent["id"], "emoji_name": "eyes"}), "REACTION_ALREADY_EXISTS")
succeeded("typing", bot.set_typing_status({"op": "start", "type": "stream", "stream_id": general["stream_id"], "topic": "checks"}))
dm = succeeded("a direct message", person.send_message({"type": "private", "to": [bot_me["user_id"]], "content": "hello bot"}), {"id": "int"})
ok("edits, reactions, typing, a direct message")

# Fetching by anchor, in a topic, as tactful catches up.
page = succeeded(
    "messages after an anchor",
    bot.get_messages({"anchor": sent["id"], "num_before": 0, "num_after": 100, "include_anchor": False, "apply_markdown": False}),
    MESSAGES,
)
ids = [m["id"] for m in page["messages"]]
if ids != sorted(ids) or sent["id"] in ids or answer["id"] not in ids or dm["id"] not in ids:
    fail(f"messages after the anchor: {ids}")
for m in page["messages"]:
    shaped("a fetched message", m, MESSAGE)
direct = next(m for m in page["messages"] if m["id"] == dm["id"])
if not isinstance(direct["display_recipient"], list):
    fail("a direct message's display_recipient is its people")
for r in direct["display_recipient"]:
    shaped("a direct message's recipient", r, RECIPIENT)
topic = succeeded(
    "a topic's messages",
    bot.get_messages({"anchor": "newest", "num_before": 10, "num_after": 0, "narrow": [{"operator": "stream", "operand": general["stream_id"]}, {"operator": "topic", "operand": "checks"}]}),
    MESSAGES,
)
if {m["id"] for m in topic["messages"]} != {sent["id"], answer["id"]}:
    fail(f"the topic narrow: {[m['id'] for m in topic['messages']]}")
ok("messages by anchor and by topic")

# Errors as the client reads them.
stranger = zulip.Client(email=person_email, api_key="wrongkey" * 4, site=site, retry_on_errors=False)
refused("a wrong key", stranger.get_profile(), "INVALID_API_KEY")
refused("a stream that is not there", person.send_message({"type": "stream", "to": "nowhere", "topic": "t", "content": "x"}), "STREAM_DOES_NOT_EXIST")
refused("a queue that is not there", bot.get_events(queue_id="1:nothing", last_event_id=-1), "BAD_EVENT_QUEUE_ID")

# The client's own loop registers again when its queue is gone.
heard = []
done = threading.Event()


def on_event(e):
    heard.append(e)
    if e.get("type") == "message" and e["message"]["content"] == "after the queue expired":
        done.set()


def run():
    try:
        bot.call_on_each_event(on_event, event_types=["message"], apply_markdown=False)
    except SystemExit:
        pass


threading.Thread(target=run, daemon=True).start()
print("ready for the queue to expire", flush=True)
# The test waits for the loop's queue, forgets every queue, waits for the
# loop to register again, then answers on stdin.
sys.stdin.readline()
person.send_message({"type": "stream", "to": "general", "topic": "checks", "content": "after the queue expired"})
if not done.wait(30):
    fail(f"the client's loop never heard the message after its queue expired: {heard!r}")
ok("a new queue after BAD_EVENT_QUEUE_ID")
sys.exit(0)
