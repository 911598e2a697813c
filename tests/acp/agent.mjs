// An ACP agent for tactful's tests, written with the official TypeScript
// SDK. What it does depends on the newest "[from ...]" line of the prompt:
//   HANG        streams one chunk, then waits until session/cancel arrives
//   CRASH       streams one chunk, then the process exits with status 3
//   PERMISSION:<kind>   asks permission for a tool of that kind and reports the choice
//   anything else       streams a line saying which session and prompt this is
import { agent, methods, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";
import { Readable, Writable } from "node:stream";

let next = 0;
const sessions = new Map();

const say = (client, sessionId, text) =>
  client.notify(methods.client.session.update, {
    sessionId,
    update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
  });

const app = agent({ name: "tactful-test-agent" })
  .onRequest(methods.agent.initialize, () => ({
    protocolVersion: PROTOCOL_VERSION,
    agentCapabilities: {},
    authMethods: [],
    agentInfo: { name: "tactful-test-agent", version: "1.0.0" },
  }))
  .onRequest(methods.agent.session.new, ({ params }) => {
    const sessionId = `s${++next}`;
    sessions.set(sessionId, { prompts: 0, cancel: null, cwd: params.cwd });
    return { sessionId };
  })
  .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
    const s = sessions.get(params.sessionId);
    s.prompts += 1;
    const text = params.prompt.filter((b) => b.type === "text").map((b) => b.text).join("\n");
    const trigger = text.split("\n").filter((l) => l.startsWith("[from")).pop() ?? "";
    if (trigger.includes("HANG")) {
      await say(client, params.sessionId, "let me think");
      await new Promise((resolve) => { s.cancel = resolve; });
      return { stopReason: "cancelled" };
    }
    if (trigger.includes("CRASH")) {
      await say(client, params.sessionId, "about to ");
      process.exit(3);
    }
    const ask = trigger.match(/PERMISSION:(\w+)/);
    if (ask) {
      const res = await client.request(methods.client.session.requestPermission, {
        sessionId: params.sessionId,
        toolCall: { toolCallId: "tc1", title: "Write notes.txt", kind: ask[1], status: "pending" },
        options: [
          { optionId: "allow", name: "Allow", kind: "allow_once" },
          { optionId: "reject", name: "Reject", kind: "reject_once" },
        ],
      });
      const choice = res.outcome.outcome === "selected" ? res.outcome.optionId : "cancelled";
      await say(client, params.sessionId, `permission ${ask[1]}: ${choice}`);
      return { stopReason: "end_turn" };
    }
    const context = text.includes("How to read the conversation") ? "full" : "delta";
    const reply = `session ${params.sessionId} prompt ${s.prompts} context ${context} cwd ${s.cwd} | ${trigger}`;
    for (const piece of reply.match(/[\s\S]{1,16}/g)) await say(client, params.sessionId, piece);
    return { stopReason: "end_turn" };
  })
  .onNotification(methods.agent.session.cancel, ({ params }) => {
    sessions.get(params.sessionId)?.cancel?.();
  });

app.connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
