// The demo web room in a real browser, as a newcomer and their colleague
// use it: Debian's Chromium driven by playwright-core.
//
// Usage: node demo.mjs <tactful binary> <port> <store> <broken config> <screenshot folder>
// Starts `tactful demo` itself (so it can stop and restart it), then a
// second service from <broken config> whose agent cannot start. Exits 0
// when every check passes; prints each check and what failed otherwise.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { DESKTOP, WAIT, launch, person as join_, report, send, start as startTactful, stop } from "./harness.mjs";

const [tactful, port, store, brokenConfig, shots] = process.argv.slice(2);
if (!shots) {
  console.error("usage: node demo.mjs <tactful> <port> <store> <broken config> <screenshot folder>");
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
const url = `http://127.0.0.1:${port}/`;

const start = (args) => startTactful(tactful, args, { env: { OPENAI_API_KEY: "" } });
const browser = await launch();
const check = report.check;

const PHONE = { width: 390, height: 844 };

/** The join form's geometry: wide inputs, labels above them, no overflow. */
async function formIsUsable(page, what, minWidth) {
  const box = async (sel) => page.locator(sel).boundingBox();
  const name = await box("#name"), room = await box("#room"), label = await box('label[for="name"]');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
  check(name.width >= minWidth && room.width >= minWidth, `${what}: the name and room inputs are wide (${Math.round(name.width)} px)`);
  check(label.y + label.height <= name.y + 1, `${what}: the label sits above its input`);
  check(!overflow, `${what}: nothing overflows sideways`);
}

const person = (context, name, room = "lobby", viewport = DESKTOP) => join_(context, url, name, room, viewport);

/** A bot's message that quotes `quoted` (the reply to it). */
const replyTo = (page, who, quoted) =>
  page.locator(".msg", { has: page.locator(".who", { hasText: who }) })
    .filter({ has: page.locator(".quote", { hasText: quoted }) });
const message = (page, text) => page.locator(".msg", { has: page.locator(".text", { hasText: text }) });

let demo = await start(["demo", "--listen", `127.0.0.1:${port}`, "--store", store]);
try {
  // The first screen, at a laptop's size and a phone's.
  const first = await browser.newContext();
  const look = await first.newPage();
  await look.setViewportSize(DESKTOP);
  await look.goto(url);
  await formIsUsable(look, "1280×720", 200);
  await look.screenshot({ path: join(shots, "join-desktop.png") });
  await look.setViewportSize(PHONE);
  await formIsUsable(look, "phone", 250);
  check(!(await look.locator("#menu").isVisible()), "phone: no ☰ before joining (there is nothing to list yet)");
  await look.screenshot({ path: join(shots, "join-phone.png") });
  await first.close();

  const aliceCtx = await browser.newContext();
  const bobCtx = await browser.newContext();
  const alice = await person(aliceCtx, "Alice");
  const bob = await person(bobCtx, "Bob");
  check(await bob.locator(".member", { hasText: "Guide" }).locator(".badge").count() === 1, "personas are members with a bot badge");
  check(/^\/r\/lobby/.test(new URL(alice.url()).pathname), "the room is in the URL (/r/lobby)");

  // The empty lobby introduces its personas in plain words, with messages
  // to try.
  const intro = alice.locator("#intro");
  await intro.waitFor(WAIT);
  const introText = await intro.innerText();
  check(/Guide reads everything/.test(introText) && /Host answers when you mention it/.test(introText), `the introduction says what each persona does (${JSON.stringify(introText)})`);
  check(await intro.locator(".try button", { hasText: "@Host hello" }).count() === 1, "the introduction offers messages to try");
  await alice.screenshot({ path: join(shots, "intro-desktop.png") });

  await send(alice, "lunch at noon anyone");
  await send(alice, "what does ambient mode do?");
  check(await alice.locator(".msg.mine").count() === 2, "own messages are marked");

  // The guide answers the question (ambient: within its batch interval), as
  // a reply that quotes it, and cites the docs.
  const guide = replyTo(bob, "Guide", "what does ambient mode do?");
  await guide.first().waitFor(WAIT);
  check(/from docs\/faq\.md/.test(await guide.first().locator(".text").innerText()), "the guide cites the file it answered from");
  check(await bob.locator(".quote", { hasText: "lunch at noon" }).count() === 0, "chit-chat gets no reply");

  // Why: on the chit-chat, each persona's reason is there for everyone.
  const lunchWhy = message(bob, "lunch at noon anyone").locator(".why");
  await lunchWhy.locator("span", { hasText: "Host: not answering: not addressed to it" }).waitFor(WAIT);
  await lunchWhy.locator("span", { hasText: "Guide:" }).waitFor(WAIT);
  check(true, "the decision view gives a reason for personas that stayed silent");
  const order = (await lunchWhy.locator("span").allInnerTexts()).map((t) => t.split(":")[0]);
  check(JSON.stringify(order) === JSON.stringify(["Guide", "Host"]), `decision notes in the personas' order (${order})`);

  // A mention typed by hand, not picked from the autocomplete.
  await alice.fill("#text", "@Host what can you do");
  await alice.press("#text", "Escape");
  await alice.press("#text", "Enter");
  await replyTo(bob, "Host", "@Host what can you do").first().waitFor(WAIT);
  check(true, "a typed @Host is a mention and is answered");

  // @ autocomplete: choosing Host inserts the name and a real mention.
  await alice.fill("#text", "");
  await alice.type("#text", "@Ho");
  await alice.waitForSelector("#suggest div", WAIT);
  check((await alice.locator("#suggest div").first().innerText()).includes("Host"), "@ suggests Host");
  await alice.press("#text", "Enter");
  await alice.type("#text", "hello there");
  check((await alice.inputValue("#text")) === "@Host hello there", "the chosen name is inserted");
  await alice.press("#text", "Enter");
  const host = replyTo(bob, "Host", "@Host hello there");
  await host.first().waitFor(WAIT);
  check(await host.count() === 1, "Host answers its mention, once");

  // Shift+Enter breaks the line; Enter sends.
  await alice.fill("#text", "first line");
  await alice.press("#text", "Shift+Enter");
  await alice.type("#text", "second line");
  check((await alice.inputValue("#text")) === "first line\nsecond line", "Shift+Enter breaks the line");
  await alice.press("#text", "Enter");
  const twoLines = message(bob, "first line").last();
  await twoLines.waitFor(WAIT);
  check((await twoLines.locator(".text").innerHTML()).includes("<br>"), "the message keeps its line break");

  // Markdown is rendered; HTML anyone types is shown as text.
  await send(alice, "**bold** and `code` and <b>not bold</b> <img src=x onerror=alert(1)>");
  const md = message(bob, "and code and").last();
  await md.waitFor(WAIT);
  check(await md.locator(".text strong", { hasText: "bold" }).count() === 1, "Markdown bold is rendered");
  check(await md.locator(".text code", { hasText: "code" }).count() === 1, "Markdown code is rendered");
  check(await md.locator(".text b").count() === 0 && await md.locator(".text img").count() === 0, "typed HTML is not markup");
  check((await md.locator(".text").innerText()).includes("<b>not bold</b>"), "typed HTML shows as text");

  // A bare address is a link; a mention of Bob is a pill and his is marked;
  // a reply quotes the message rendered, not as raw Markdown.
  await send(alice, "@Bob the docs are at https://example.org/docs, see you");
  const toBob = message(bob, "the docs are at").last();
  await toBob.waitFor(WAIT);
  check(await toBob.evaluate((d) => d.classList.contains("tome")), "a message naming you is marked");
  check(await toBob.locator(".pill.me", { hasText: "@Bob" }).count() === 1, "@Bob is a pill");
  const link = toBob.locator('.text a[href="https://example.org/docs"]');
  check(await link.count() === 1 && (await link.getAttribute("rel")).includes("noopener"), "a bare address is a safe link, without the comma after it");
  check(!(await message(alice, "the docs are at").last().evaluate((d) => d.classList.contains("tome"))), "it is not marked for the one who wrote it");
  await md.locator("button.reply").click();
  await send(bob, "noted");
  const quoted = message(alice, "noted").last().locator(".quote");
  await quoted.waitFor(WAIT);
  check(await quoted.locator("code", { hasText: "code" }).count() === 1 && !(await quoted.innerText()).includes("`"), "a quote is rendered, not raw backticks");
  await bob.screenshot({ path: join(shots, "mention-link-quote.png") });

  // Over the length limit: refused in the page, and the text stays.
  const long = "x".repeat(4001);
  await alice.fill("#text", long);
  await alice.press("#text", "Enter");
  check((await alice.inputValue("#text")) === long, "an over-long message stays in the box");
  check(await alice.locator("#notice").isVisible(), "and the page says why");
  check((await alice.locator("#counter").innerText()).includes("4001"), "the counter shows the length");
  await alice.fill("#text", "");

  // A second tab of Alice (same browser) is Alice; someone else taking the
  // name while she is here is refused; closing her second tab leaves her in
  // the member list.
  const aliceTab2 = await person(aliceCtx, "Alice");
  check(await aliceTab2.locator(".msg", { hasText: "lunch at noon anyone" }).count() === 1, "Alice's second tab joins as Alice");
  const mallory = await (await browser.newContext()).newPage();
  await mallory.goto(url);
  await mallory.fill("#name", "alice");
  await mallory.click("#join button");
  await mallory.locator("#joinerror", { hasText: "already" }).waitFor(WAIT);
  check(true, "another person cannot take Alice's name while she is here");
  await aliceTab2.close();
  await send(alice, "still here");
  await message(bob, "still here").first().waitFor(WAIT);
  check(await bob.locator(".member", { hasText: "Alice" }).count() === 1, "closing one of Alice's tabs leaves her listed");

  // A direct conversation from the member list: only Bob's, answered
  // without a mention; Alice, at its address, gets her own.
  await bob.locator(".member", { hasText: "Guide" }).locator("button.dm").click();
  await bob.waitForURL(/\/r\/%40guide\./, WAIT);
  check((await bob.locator("#roomname").innerText()).startsWith("@Guide"), "the direct room is named after Guide");
  await bob.locator("#intro", { hasText: "only you see it" }).waitFor(WAIT);
  await send(bob, "is there a demo config I can copy?");
  await send(bob, "what does ambient mode do?");
  await replyTo(bob, "Guide", "what does ambient mode do?").first().waitFor(WAIT);
  check(true, "Guide answers in the direct room");
  await bob.screenshot({ path: join(shots, "direct-desktop.png") });
  const dmUrl = bob.url();
  const peek = await aliceCtx.newPage();
  await peek.goto(dmUrl);
  await peek.waitForSelector("#log", WAIT);
  await peek.locator("#intro", { hasText: "only you see it" }).waitFor(WAIT);
  check(await message(peek, "is there a demo config").count() === 0 && peek.url() !== dmUrl, "Bob's direct room's address gives Alice her own, not his");
  await peek.close();
  await bob.locator(".roomlink", { hasText: "#lobby" }).click();
  await bob.locator(".msg", { hasText: "lunch at noon anyone" }).first().waitFor(WAIT);

  // Another room by the switcher: its own address and history; back again.
  check((await bob.title()).includes("#lobby · tactful"), "the page title names the room");
  await bob.fill("#newroomname", "side");
  await bob.press("#newroomname", "Enter");
  await bob.waitForURL(/\/r\/side/, WAIT);
  await send(bob, "over here");
  check(await bob.locator(".msg", { hasText: "lunch at noon anyone" }).count() === 0, "another room shows its own history");
  await bob.locator(".roomlink", { hasText: "#lobby" }).click();
  await bob.locator(".msg", { hasText: "lunch at noon anyone" }).first().waitFor(WAIT);
  check(/\/r\/lobby/.test(new URL(bob.url()).pathname), "the switcher goes back to the lobby");

  await bob.screenshot({ path: join(shots, "room-bob-desktop.png"), fullPage: true });
  // Bob reloads: still Bob, in the same room, his rooms still listed.
  await bob.reload();
  await bob.waitForSelector("#log", WAIT);
  await bob.locator(".roomlink", { hasText: "#side" }).waitFor(WAIT);
  check((await bob.locator("#roomname").innerText()).includes("you are Bob") && await bob.locator(".roomlink", { hasText: "@Guide" }).count() === 1, "a reload keeps the name, the room and the rooms joined");

  // On a phone: an empty room's introduction, a click on an example; the
  // ☰ lists rooms and members.
  const patCtx = await browser.newContext();
  const patIntro = await person(patCtx, "Pat", "quiet-corner", PHONE);
  await patIntro.locator("#intro").waitFor(WAIT);
  await patIntro.screenshot({ path: join(shots, "intro-phone.png") });
  await patIntro.locator("#intro .try button", { hasText: "@Host hello" }).click();
  await replyTo(patIntro, "Host", "@Host hello").first().waitFor(WAIT);
  check(true, "phone: a click on an example sends it, and Host answers");
  await patIntro.click("#menu");
  check(await patIntro.locator("#side").isVisible() && await patIntro.locator("#side .member", { hasText: "Guide" }).count() === 1, "phone: ☰ opens the rooms and members");
  await patIntro.screenshot({ path: join(shots, "menu-phone.png") });
  await patIntro.close();
  const phone = await join_(patCtx, `${url}r/lobby`, "Pat", "lobby", PHONE);
  await message(phone, "lunch at noon anyone").first().waitFor(WAIT);
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
  check(!overflow, "the room fits a phone's width");
  await phone.screenshot({ path: join(shots, "room-phone.png") });

  // Following the bottom, on a phone (where the lobby overflows) and on a
  // desktop: at the bottom, what arrives or grows stays in view (a reply
  // streaming in, the decision notes under it); scrolled up, the view
  // stays put and a button counts what came below.
  const bottomGap = (page) => page.evaluate(() => { const l = document.getElementById("log"); return l.scrollHeight - l.scrollTop - l.clientHeight; });
  const lastInView = (page) => page.evaluate(() => {
    const l = document.getElementById("log"), msgs = l.querySelectorAll(".msg"), last = msgs[msgs.length - 1];
    return last.getBoundingClientRect().bottom <= l.getBoundingClientRect().bottom + 1;
  });
  for (let i = 0; i < 14; i++) await send(alice, `filler line ${i} to fill a phone's screen`);
  for (const [page, size] of [[phone, "phone"], [bob, "desktop"]]) {
    await message(page, "filler line 13").first().waitFor(WAIT);
    await page.waitForFunction(() => { const l = document.getElementById("log"); return l.scrollHeight - l.scrollTop - l.clientHeight < 2; }, null, WAIT);
    check(true, `${size}: at the bottom, new messages stay in view`);
  }
  const asked = "how does the rate limit work?";
  await send(phone, asked);
  const answer = replyTo(phone, "Guide", asked);
  await answer.first().waitFor(WAIT);
  await message(phone, asked).locator(".why span", { hasText: "Guide:" }).waitFor(WAIT);
  for (const [page, size] of [[phone, "phone"], [bob, "desktop"]]) {
    await page.waitForFunction(() => {
      const l = document.getElementById("log"), msgs = l.querySelectorAll(".msg"), last = msgs[msgs.length - 1];
      return last.getBoundingClientRect().bottom <= l.getBoundingClientRect().bottom + 1;
    }, null, WAIT);
    check(await lastInView(page), `${size}: the reply and its notes end in view, not cut off`);
  }
  await phone.screenshot({ path: join(shots, "room-phone-followed.png") });
  await phone.evaluate(() => { document.getElementById("log").scrollTop = 0; });
  // The page has heard the scroll (it stops following) before Alice speaks.
  await phone.waitForFunction(() => document.getElementById("log").scrollTop === 0 && !stick, null, WAIT);
  await send(alice, "said while Pat reads back");
  await phone.locator("#newbelow", { hasText: /new messages?$/ }).waitFor(WAIT);
  check(await phone.evaluate(() => document.getElementById("log").scrollTop) === 0, "phone: scrolled up, the view stays where it is");
  check(true, "phone: a button counts the new message below");
  await phone.screenshot({ path: join(shots, "room-phone-new-below.png") });
  await phone.click("#newbelow");
  await phone.waitForFunction(() => { const l = document.getElementById("log"); return l.scrollHeight - l.scrollTop - l.clientHeight < 2; }, null, WAIT);
  check(!(await phone.locator("#newbelow").isVisible()), "phone: the button goes to the bottom and goes away");
  await message(bob, "said while Pat reads back").first().waitFor(WAIT);
  await bob.waitForFunction(() => { const l = document.getElementById("log"); return l.scrollHeight - l.scrollTop - l.clientHeight < 2; }, null, WAIT);
  check((await bottomGap(bob)) < 2, "desktop: still following");

  // The server stops: a banner says so, text typed meanwhile stays; it
  // comes back on the same port and store: the page reconnects by itself
  // and the history is there.
  // Someone who opened the page just before the server stopped: joining
  // says it cannot reach the room, and the form can be sent again.
  const late = await (await browser.newContext()).newPage();
  await late.goto(url);
  await stop(demo);
  await late.fill("#name", "Lee");
  await late.click("#join button");
  await late.locator("#joinerror", { hasText: "Cannot reach the room" }).waitFor(WAIT);
  check(await late.locator("#join button").isEnabled() && (await late.locator("#join button").innerText()) === "Join", "a join that cannot reach the room gives the button back");
  await late.close();
  await alice.locator("#banner", { hasText: "Reconnecting" }).waitFor(WAIT);
  check(true, "a banner says the room is disconnected");
  await alice.fill("#text", "typed while it was down");
  await alice.press("#text", "Enter");
  check((await alice.inputValue("#text")) === "typed while it was down", "text typed while disconnected is kept");
  demo = await start(["demo", "--listen", `127.0.0.1:${port}`, "--store", store]);
  await alice.locator("#banner").waitFor({ state: "hidden", timeout: 45_000 });
  check(true, "the page reconnects by itself");
  await message(alice, "what does ambient mode do?").first().waitFor(WAIT);
  await alice.press("#text", "Enter");
  await message(bob, "typed while it was down").first().waitFor(WAIT);
  check(true, "after reconnecting, the kept text is sent and others see it");
  await alice.screenshot({ path: join(shots, "room-alice-after-restart.png"), fullPage: true });

  // A reload keeps the name and room and shows the history.
  await alice.reload();
  await alice.waitForSelector("#log", WAIT);
  await replyTo(alice, "Guide", "what does ambient mode do?").first().waitFor(WAIT);
  check(await message(alice, "lunch at noon anyone").count() === 1, "a reload shows the history");
  await stop(demo);
  demo = null;

  // A persona whose agent cannot start: the reason is on the message.
  const broken = await start(["run", "-c", brokenConfig]);
  const brokenUrl = broken.line.split(/\s+/).find((w) => w.startsWith("http://"));
  const carol = await (await browser.newContext()).newPage();
  await carol.goto(brokenUrl);
  await carol.fill("#name", "Carol");
  await carol.click("#join button");
  await carol.waitForSelector("#log", WAIT);
  await send(carol, "@Helper are you there?");
  const why = message(carol, "@Helper are you there?").locator(".why .failed");
  await why.waitFor(WAIT);
  check(/can't open file|No such file/.test(await why.innerText()), "the decision view shows why an agent failed");
  await carol.screenshot({ path: join(shots, "failed-agent.png"), fullPage: true });
  await stop(broken);
} catch (e) {
  console.log(`FAILED: ${e.message}`);
  report.failed = true;
} finally {
  if (demo) await stop(demo);
  await browser.close();
}
process.exit(report.failed ? 1 : 0);
