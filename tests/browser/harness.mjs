// What both browser scripts need: tactful started and stopped as a child
// process, Debian's Chromium launched for a closed network, and checks
// printed one a line ("ok: …" / "FAILED: …") for the Rust test to read.
import { chromium } from "playwright-core";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

/**
 * Starts `tactful` with `args`; resolves once it printed its ready line.
 * `onLog` (optional) hears each line of its log (stderr), else the log is
 * shown as it comes.
 */
export function start(tactful, args, { env = {}, onLog } = {}) {
  const stderr = onLog ? "pipe" : "inherit";
  const child = spawn(tactful, args, { stdio: ["ignore", "pipe", stderr], env: { ...process.env, ...env } });
  if (onLog) createInterface({ input: child.stderr }).on("line", onLog);
  const lines = createInterface({ input: child.stdout });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`tactful ${args[0]} did not start`)), 30_000);
    lines.on("line", (line) => { if (line.includes("http://")) { clearTimeout(timer); resolve({ child, line }); } });
    child.on("exit", (code) => reject(new Error(`tactful ${args[0]} exited with ${code}`)));
  });
}

/** Stops a started tactful with SIGTERM; resolves once it exited. */
export const stop = (t) => new Promise((resolve) => { t.child.removeAllListeners("exit"); t.child.on("exit", resolve); t.child.kill("SIGTERM"); });

/**
 * Chromium with flags for a closed network: no background connections it
 * would otherwise try (and fail) to make. Playwright gives it a fresh
 * profile.
 */
export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
}

/** Every check's outcome; `failed` is set by the first that fails. */
export const report = {
  failed: false,
  check(ok, what) {
    console.log(`${ok ? "ok" : "FAILED"}: ${what}`);
    if (!ok) report.failed = true;
  },
};

export const WAIT = { timeout: 30_000 };

export const DESKTOP = { width: 1280, height: 720 };

/** A person joining room `room` of the web room at `url`, as a new tab. */
export async function person(context, url, name, room = "lobby", viewport = DESKTOP) {
  const page = await context.newPage();
  await page.setViewportSize(viewport);
  await page.goto(url);
  // Someone who joined in this browser before is let in again by itself
  // (a second tab, a reload): no form to fill.
  const known = await page.evaluate(() => localStorage.getItem("tactful-name"));
  if (known !== name) {
    await page.fill("#name", name);
    await page.fill("#room", room);
    await page.click("#join button");
  }
  await page.waitForSelector("#log", WAIT);
  return page;
}

/** Sends `text` and waits until the room shows it back as one's own. */
export async function send(page, text) {
  const before = await page.locator(".msg.mine").count();
  await page.fill("#text", text);
  await page.press("#text", "Enter");
  await page.locator(".msg.mine").nth(before).waitFor(WAIT);
}
