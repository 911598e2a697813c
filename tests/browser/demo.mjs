// The demo web room in a real browser: Debian's Chromium driven by
// playwright-core. Usage: node demo.mjs <room URL> <screenshot folder>
// Exits 0 when every check passes; prints what failed otherwise.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const [url, shots] = process.argv.slice(2);
if (!url || !shots) {
  console.error("usage: node demo.mjs <url> <screenshot folder>");
  process.exit(2);
}
mkdirSync(shots, { recursive: true });

// Flags for a closed network: no background connections Chromium would
// otherwise try (and fail) to make. Playwright gives it a fresh profile.
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});

const WAIT = { timeout: 30_000 };
let failed = false;
function check(ok, what) {
  console.log(`${ok ? "ok" : "FAILED"}: ${what}`);
  if (!ok) failed = true;
}

async function person(name) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(url);
  await page.fill("#name", name);
  await page.fill("#room", "lobby");
  await page.click("#join button");
  await page.waitForSelector("#log", WAIT);
  return page;
}

async function send(page, text) {
  await page.fill("#text", text);
  await page.press("#text", "Enter");
  await page.waitForSelector(`.msg .text >> text="${text}"`, WAIT);
}

/** A bot's message that quotes `quoted` (the reply to it). */
const replyTo = (page, who, quoted) =>
  page.locator(".msg", { has: page.locator(".who", { hasText: who }) })
    .filter({ has: page.locator(".quote", { hasText: quoted }) });

try {
  const alice = await person("Alice");
  const bob = await person("Bob");
  check(await bob.locator(".member", { hasText: "Guide" }).locator(".badge").count() === 1, "personas are members with a bot badge");

  await send(alice, "lunch at noon anyone");
  await send(alice, "what does ambient mode do?");

  // The guide answers the question (ambient: within its batch interval), as
  // a reply that quotes it, and cites the docs.
  const guide = replyTo(bob, "Guide", "what does ambient mode do?");
  await guide.first().waitFor(WAIT);
  check(/from docs\/faq\.md/.test(await guide.first().locator(".text").innerText()), "the guide cites the file it answered from");

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

  // Chit-chat got no reply from anyone.
  check(await bob.locator(".quote", { hasText: "lunch at noon" }).count() === 0, "chit-chat gets no reply");

  await bob.screenshot({ path: join(shots, "demo-bob.png"), fullPage: true });

  // A reload shows the history (the name and room are remembered).
  await alice.reload();
  await alice.click("#join button");
  await alice.waitForSelector("#log", WAIT);
  await replyTo(alice, "Guide", "what does ambient mode do?").first().waitFor(WAIT);
  check(await alice.locator(".msg .text", { hasText: "lunch at noon anyone" }).count() === 1, "a reload shows the history");
  await alice.screenshot({ path: join(shots, "demo-alice-after-reload.png"), fullPage: true });
} catch (e) {
  console.log(`FAILED: ${e.message}`);
  failed = true;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
