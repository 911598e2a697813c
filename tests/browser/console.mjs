// The operator console in a real browser, as the person who runs tactful
// uses it: Debian's Chromium driven by playwright-core.
//
// Usage: node console.mjs <tactful binary> <config> <web port> <server port> <token> <screenshot folder>
// Starts `tactful run -c <config>` itself (so it can restart it). A person
// talks in the web room in one tab; the console, in another, must show
// why each persona spoke or not, as it happens: a silence, an agent's
// failure in its own words, a reply gate's SKIP, an ambient batch counting
// down to its flush, a hook stopping a reply.
// Then a policy edit (mention → all) applies on the next message and
// survives a restart, a dry run shows what would change, a bad edit gets
// `tactful check`'s words, an empty one is refused (use Revert), a draft
// outlives the page's refreshes, Apply takes only the text tried and shows
// the difference, and a wrong token or another site's page is refused.
// A decision marked "should have answered" is counted, exported, scored by
// Try, kept across the restart and cleared by pressing it again.
// Exits 0 when every check passes.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { WAIT, launch, person as join_, report, send, start as startTactful, stop } from "./harness.mjs";

const [tactful, config, webPort, serverPort, token, shots] = process.argv.slice(2);
if (!shots) {
  console.error("usage: node console.mjs <tactful> <config> <web port> <server port> <token> <screenshot folder>");
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
const room = `http://127.0.0.1:${webPort}/`;
const consoleUrl = `http://127.0.0.1:${serverPort}/console`;
const logs = [];

const start = () => startTactful(tactful, ["run", "-c", config], { env: { RUST_LOG: "info" }, onLog: (l) => logs.push(l) });
const browser = await launch();
const check = report.check;

/** Waits until `f` holds (30 s at most); whether it did. */
async function eventually(f) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (await f()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

const person = (context, name) => join_(context, room, name);

const botSaid = (page, text) => page.locator(".msg", { has: page.locator(".text", { hasText: text }) });
const live = (page) => page.locator("#live").innerText();

let service = await start();
try {
  const people = await browser.newContext();
  const alice = await person(people, "Alice");
  // One message first, so the console has a room to open.
  await send(alice, "@Docs hello");
  await botSaid(alice, "hi there").first().waitFor(WAIT);

  const ops = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const con = await ops.newPage();
  await con.goto(`${consoleUrl}?token=${encodeURIComponent(token)}`);
  await con.locator(".room", { hasText: "lobby" }).first().waitFor(WAIT);
  check(!new URL(con.url()).search.includes(token), "the token leaves the address bar");
  await con.locator(".room", { hasText: "lobby" }).first().click();
  check(await eventually(async () => (await con.locator("#live-status").innerText()).includes("connected")), "the live transcript connects");

  // Why each persona spoke or not, live.
  await send(alice, "@Docs please stay quiet");
  check(await eventually(async () => /docs: stayed silent \(silence_token\)/.test(await live(con))), "a silent persona's reason is shown live");
  check(await eventually(async () => /docs: reacted 👀/.test(await live(con))), "the reaction for a silence on a mention is shown live");
  check(await eventually(async () => (await alice.locator(".msg.mine .reaction", { hasText: "👀" }).count()) === 1), "the person sees 👀 on the message they asked with");
  await send(alice, "@Broken status?");
  check(await eventually(async () => /broken: error: .*the tool crashed/.test(await live(con))), "a failed agent's error is shown, in its own words");
  await send(alice, "how is everyone");
  check(await eventually(async () => /scout: skip · gate_skip/.test(await live(con))), "a reply gate's SKIP is shown live");
  check(await eventually(async () => /scout: gate answered in \d+ ms/.test(await live(con))), "the gate call's latency is shown");
  check(await eventually(async () => /owl: in batch, flushes in ~(59\d|600) s/.test(await live(con))), "an ambient batch counts down to its flush");
  await send(alice, "@Docs what is the secret?");
  check(await eventually(async () => /docs: hook no-secrets: cancel/.test(await live(con))), "a hook's cancel is shown live");
  check(await eventually(async () => (await con.locator("#rows").innerText()).includes("gate_skip")), "decisions are listed from the store");
  check(await eventually(async () => /error: .*the tool crashed/.test(await con.locator("#calls").innerText())), "the failed call is in the agent calls");
  check(await eventually(async () => (await con.locator("#costs").innerText()).includes("lobby")), "the room's cost is listed");
  await con.screenshot({ path: join(shots, "console-desktop.png"), fullPage: false });

  // Filters: one persona, one reason.
  await con.selectOption("#persona", "scout");
  check(await eventually(async () => !(await con.locator("#rows").innerText()).includes("docs")), "the persona filter hides the others");
  await con.selectOption("#persona", "");

  // A bad edit: refused with check's words when tried, and never applicable.
  await con.locator("#policy-box summary").click();
  check(await con.isDisabled("#apply"), "Apply waits for a Try");
  await con.fill("#policy", 'mode = "shout"\n');
  await con.click("#try");
  check(await eventually(async () => (await con.locator("#policy-status").innerText()).includes("console:1:8: unknown variant `shout`")), "an invalid edit is refused with the config check's message");
  check(await con.isDisabled("#apply"), "a refused edit cannot be applied");

  // An empty policy is refused, on the page and by the API: Revert is the way back.
  await con.fill("#policy", "");
  await con.click("#try");
  check(await eventually(async () => (await con.locator("#policy-status").innerText()).includes("use Revert")), "an empty policy is refused: use Revert");
  check(await con.isDisabled("#apply"), "an empty policy cannot be applied");
  const emptyPut = await con.evaluate(async (t) => {
    const r = await fetch("/console/api/policy?room=lobby", { method: "PUT", headers: { "Authorization": "Bearer " + t }, body: "" });
    return { status: r.status, body: await r.json() };
  }, token);
  check(emptyPut.status === 400 && /use Revert/.test(emptyPut.body.error), "the API refuses an empty policy with JSON saying to use Revert");

  // Marks: Docs should have answered the chatter. The page keeps the
  // mark, counts it, and exports it as a file `tactful eval` reads.
  const docsRow = () => con.locator("#rows tr", { hasText: "how is everyone" }).filter({ has: con.locator("td", { hasText: /^docs$/ }) }).first();
  const pressed = async (cls) => (await docsRow().locator("button." + cls).getAttribute("aria-pressed")) === "true";
  await docsRow().locator("button.mark-reply").click();
  check(await eventually(() => pressed("mark-reply")), "a decision is marked: should have answered");
  check(await eventually(async () => /^1 decisions marked here \(1 should have answered, 0 should have stayed quiet\)/.test(await con.locator("#marks").innerText())), "the page counts the room's marks");
  const exported = await con.evaluate(async (t) => (await fetch("/console/api/labels?room=lobby", { headers: { "Authorization": "Bearer " + t } })).text(), token);
  check(/"text":"how is everyone"/.test(exported) && /"expect":\{"docs":"reply"\}/.test(exported), "the marks export as a labelled file");

  // Try before applying: the chatter would now be answered.
  await con.fill("#policy", 'mode = "all"\n');
  await con.click("#try");
  check(await eventually(async () => /decisions would change/.test(await con.locator("#policy-status").innerText())), "the dry run says what would change");
  check(await eventually(async () => /how is everyone — docs: \w+ · \w+ → reply · /.test(await con.locator("#tried").innerText())), "the dry run lists a decision that would change");
  // Under mode "all" for the whole room Owl, not Docs, would take the
  // floor on that message: the score says the change does not help Docs.
  check(await eventually(async () => (await con.locator("#score").innerText()) === "On 1 marked decisions: precision – → –, recall 0.00 → 0.00, F1 – → – (agents bad taken to answer whenever asked)"), "Try scores the policy on the room's marks");
  check((await con.locator("#effective").innerText()).includes("docs: mention"), "a dry run applies nothing");
  check((await con.locator("#diff").innerText()).includes('+ mode = "all"'), "the dry run shows the difference Apply would make");

  // The draft outlives the refreshes that follow: a message in the room
  // has the page read everything again while the box has no focus.
  await send(alice, "is my draft kept?");
  check(await eventually(async () => (await con.locator("#rows").innerText()).includes("is my draft kept?")), "the page read the room again");
  await new Promise((r) => setTimeout(r, 1500));
  check((await con.inputValue("#policy")) === 'mode = "all"\n', "a draft survives the refresh after Try");
  check(!(await con.isDisabled("#apply")), "what was tried can be applied");

  // Changed after Try: Apply waits for another Try; back to the tried text, it may apply it.
  await con.fill("#policy", 'mode = "all"\n# one more thought\n');
  check(await con.isDisabled("#apply"), "Apply waits for a Try of the text as it is");
  check((await con.locator("#apply-hint").innerText()).includes("try it again"), "the page says why Apply waits");
  await con.fill("#policy", 'mode = "all"\n');

  // Applied: exactly what was tried; the next message is answered, without a restart.
  await con.click("#apply");
  check(await eventually(async () => (await con.locator("#policy-status").innerText()) === "applied"), "the edit is applied");
  check((await con.locator("#diff").innerText()).includes('applied:\n+ mode = "all"'), "Apply shows the difference it made");
  const before = await botSaid(alice, "hi there").count();
  await send(alice, "anyone around?");
  check(await eventually(async () => (await botSaid(alice, "hi there").count()) > before), "mention → all takes effect on the next message");

  // A restart keeps it.
  await stop(service);
  service = await start();
  await alice.reload();
  await alice.waitForSelector("#log", WAIT);
  const after = await botSaid(alice, "hi there").count();
  await send(alice, "still open to all?");
  check(await eventually(async () => (await botSaid(alice, "hi there").count()) > after), "the edit survives a restart");
  await con.reload();
  await con.locator(".room", { hasText: "lobby" }).first().click();
  check(await eventually(async () => (await con.inputValue("#policy")) === 'mode = "all"\n'), "the console shows the layer after the restart");
  check(await eventually(() => pressed("mark-reply")), "the mark survives a restart");
  await docsRow().locator("button.mark-reply").click();
  check(await eventually(async () => !(await pressed("mark-reply")) && /No decision marked/.test(await con.locator("#marks").innerText())), "pressed again, the mark is cleared");

  // On a phone.
  await con.setViewportSize({ width: 390, height: 844 });
  check(!(await con.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1)), "phone: nothing overflows sideways");
  await con.screenshot({ path: join(shots, "console-phone.png") });

  // A wrong token: told so, nothing shown.
  const stranger = await (await browser.newContext()).newPage();
  await stranger.goto(`${consoleUrl}?token=not-the-token`);
  check(await eventually(async () => (await stranger.locator("#status").innerText()).includes("a valid console token is required")), "a wrong token is refused");
  check(await stranger.locator(".room", { hasText: "lobby" }).count() === 0, "nothing is shown without the token");

  // Another site's page (the web room's origin) asking the console's API
  // with the token: refused by the server, not only hidden by the browser.
  const seen = logs.length;
  await alice.evaluate(async ([url, t]) => {
    try { await fetch(`${url}/api/rooms?token=${t}`); } catch { /* blocked either way */ }
  }, [consoleUrl, token]);
  check(await eventually(async () => logs.slice(seen).some((l) => l.includes("refused a console request from another site's page"))), "another site's page is refused by the server");
  check(!logs.some((l) => l.includes(token)), "the token is never logged");
} catch (e) {
  console.log(`FAILED: ${e.stack ?? e}`);
  report.failed = true;
} finally {
  await browser.close();
  await stop(service);
}
process.exit(report.failed ? 1 : 0);
