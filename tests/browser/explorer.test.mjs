// End-to-end test of the explorer in a real browser (headless Chromium).
//
// It builds a site from a bundle (KVW_BUNDLE, default: the explorer's sample
// fixture) unless KVW_SITE_DIR points at one already built, serves it on
// 127.0.0.1 with `kvw serve` (which stops itself), and drives the
// pages with playwright-core against the system Chromium (never a
// downloaded browser). Screenshots go to KVW_SHOTS_DIR (default:
// tests/browser/screenshots) and their paths are printed.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = fileURLToPath(new URL(".", import.meta.url));
const repo = resolve(here, "../..");
const CHROMIUM = process.env.KVW_CHROMIUM || "/usr/bin/chromium";
const SHOTS = resolve(process.env.KVW_SHOTS_DIR || join(here, "screenshots"));
const SERVER_LIFETIME_MS = 240_000;

let site;
let server;
let base;
const contexts = [];

function buildSite() {
  if (process.env.KVW_SITE_DIR) return resolve(process.env.KVW_SITE_DIR);
  const bundle = resolve(process.env.KVW_BUNDLE || join(repo, "explorer/tests/fixtures/bundle"));
  const out = mkdtempSync(join(tmpdir(), "kvw-site-"));
  const run = spawnSync(
    "cargo",
    ["run", "-q", "-p", "kvw-explorer", "--example", "build_site", "--", bundle, out],
    { cwd: repo, stdio: "inherit" },
  );
  assert.equal(run.status, 0, "site build failed");
  return out;
}

/** Copy the default receipt with its payload altered: a forged receipt. */
function forgeReceipt(dir) {
  const index = readFileSync(join(dir, "index.html"), "utf8");
  const data = JSON.parse(index.match(/<script type="application\/json" id="kvw-page">(.*?)<\/script>/s)[1]);
  const envelope = JSON.parse(readFileSync(join(dir, "receipts", `${data.receipt}.json`), "utf8"));
  const payload = Buffer.from(envelope.payload, "base64").toString("utf8");
  const forged = payload.replace(/"http_status":\d+/, '"http_status":204');
  assert.notEqual(forged, payload);
  envelope.payload = Buffer.from(forged, "utf8").toString("base64");
  writeFileSync(join(dir, "receipts", "tampered.json"), JSON.stringify(envelope, null, 2));
}

/**
 * The site served by the product's own server, `kvw serve` (axum, 127.0.0.1
 * only, stops itself after --for-seconds). KVW_BIN names the binary;
 * default: the release build of this checkout.
 */
function serve(dir) {
  const targetDir = process.env.CARGO_TARGET_DIR || join(repo, "target");
  const bin = process.env.KVW_BIN || join(targetDir, "release", "kvw");
  assert.ok(existsSync(bin), `${bin} not found: run cargo build --release --bin kvw or set KVW_BIN`);
  const seconds = String(Math.ceil(SERVER_LIFETIME_MS / 1000));
  const child = spawn(bin, ["serve", "--dir", dir, "--addr", "127.0.0.1:0", "--for-seconds", seconds], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((ok, fail) => {
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      const m = out.match(/at (http:\/\/127\.0\.0\.1:\d+\/)/);
      if (m) ok({ child, url: m[1] });
    });
    child.on("exit", (code) => fail(new Error(`kvw serve exited (${code}) before listening: ${out}`)));
  });
}

/** A fresh browser with its own fresh profile folder (--user-data-dir). */
async function newPage(options = {}) {
  const profile = mkdtempSync(join(tmpdir(), "kvw-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
    viewport: { width: 1280, height: 900 },
    ...options,
  });
  contexts.push(context);
  const page = context.pages()[0] ?? (await context.newPage());
  page.errors = [];
  page.on("pageerror", (e) => page.errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") page.errors.push(m.text()); });
  return page;
}

async function ready(page) {
  await page.waitForSelector('html[data-kvw-ready="1"]', { timeout: 20_000 });
}

async function shot(page, name, fullPage = true) {
  mkdirSync(SHOTS, { recursive: true });
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage });
  console.log(`screenshot: ${path}`);
}

const visibleStep = (page) => page.locator("section.step:visible");

before(async () => {
  site = buildSite();
  forgeReceipt(site);
  server = await serve(site);
  base = server.url;
});

after(async () => {
  for (const context of contexts) await context.close().catch(() => {});
  server?.child.kill();
});

test("hydrates, verifies in the browser and steps 1 to 7 with the buttons", async () => {
  const page = await newPage();
  await page.goto(base + "index.html");
  await ready(page);
  await page.waitForSelector("#kvw-trust.ok");
  assert.match(await page.textContent("#kvw-trust"), /Verified with key [0-9a-f]{16,}/);
  const verifyMs = Number(await page.getAttribute("html", "data-kvw-verify-ms"));
  // A measurement, not a gate: these machines are noisy.
  console.log(`receipt verified in the browser in ${verifyMs} ms (target < 100 ms)`);
  assert.ok(Number.isFinite(verifyMs), "the page records how long verification took");
  assert.equal(await visibleStep(page).count(), 1, "one step at a time once hydrated");
  assert.ok(await page.isVisible("#kvw-next"), "Next is shown once hydrated");
  const titles = [await visibleStep(page).locator("h3").textContent()];
  for (let n = 2; n <= 7; n++) {
    await page.click("#kvw-next");
    await page.waitForSelector(`#step-${n}:visible`);
    assert.equal(await visibleStep(page).count(), 1);
    titles.push(await visibleStep(page).locator("h3").textContent());
    assert.match(await page.textContent("#kvw-counter"), new RegExp(`${n} / 7`));
  }
  assert.equal(new Set(titles).size, 7, `seven different steps: ${titles}`);
  assert.ok(await page.isDisabled("#kvw-next"), "Next is disabled on the last step");
  assert.match(await visibleStep(page).locator(".http").textContent(), /HTTP \d{3}/);
  if (await page.$(".verdict.leak")) {
    assert.ok(await page.isVisible("#step-7 mark.canary"), "leaked canary highlighted");
  }
  await shot(page, "hydrated-desktop-step7");
  assert.deepEqual(page.errors, []);
});

test("arrow keys and #step-N deep links move between steps", async () => {
  const page = await newPage();
  await page.goto(base + "index.html#step-4");
  await ready(page);
  await page.waitForSelector("#step-4:visible");
  await page.keyboard.press("ArrowRight");
  await page.waitForSelector("#step-5:visible");
  assert.match(page.url(), /#step-5$/);
  await page.keyboard.press("ArrowLeft");
  await page.keyboard.press("ArrowLeft");
  await page.waitForSelector("#step-3:visible");
  assert.equal(await visibleStep(page).count(), 1);
  assert.deepEqual(page.errors, []);
});

test("a fix switch swaps in the receipt of that combination", async () => {
  const page = await newPage();
  await page.goto(base + "index.html");
  await ready(page);
  const before = await page.textContent("#kvw-outcome");
  const beforeStatus = await page.textContent(".verdict-http");
  const sw = page.locator("a.switch").first();
  const name = await sw.getAttribute("data-switch");
  await sw.click();
  await page.waitForFunction(
    (old) => document.querySelector("#kvw-outcome")?.textContent !== old && !document.documentElement.hasAttribute("data-kvw-loading"),
    before,
  );
  const after = await page.textContent("#kvw-outcome");
  assert.notEqual(after, before, `toggling ${name} changes the outcome`);
  console.log(`switch ${name}: "${before}" (${beforeStatus}) -> "${after}" (${await page.textContent(".verdict-http")})`);
  await page.waitForSelector("#kvw-trust.ok");
  assert.match(page.url(), /(\/en\/.+\.html|\?receipt=.+\.json)$/, "the address follows the receipt");
  const on = page.locator(`a.switch[data-switch="${name}"] .knob`);
  assert.equal((await on.textContent()).trim(), "ON");
  // Switch it off again in place, then walk back through history.
  await page.click(`a.switch[data-switch="${name}"]`);
  await page.waitForFunction((old) => document.querySelector("#kvw-outcome")?.textContent === old, before);
  await page.waitForSelector("#kvw-trust.ok");
  await page.goBack();
  await page.waitForFunction((text) => document.querySelector("#kvw-outcome")?.textContent === text, after);
  await shot(page, "switched-desktop");
  assert.deepEqual(page.errors, []);
});

test("a tampered receipt shows a warning and is not replayed", async () => {
  const page = await newPage();
  await page.goto(base + "index.html?receipt=receipts/tampered.json");
  await ready(page);
  await page.waitForSelector("#kvw-warning", { timeout: 10_000 });
  assert.ok(await page.isVisible("#kvw-warning"));
  assert.match(await page.textContent("#kvw-trust"), /Not verified/);
  assert.equal(await page.locator("section.step").count(), 0, "no step of a forged receipt is drawn");
  await shot(page, "tampered");
});

test("the embed example mounts a verified replay", async () => {
  const page = await newPage();
  await page.goto(base + "embed-example.html");
  await page.waitForSelector('kvw-replay[data-kvw-ready="1"]', { timeout: 20_000 });
  const embed = page.locator("kvw-replay");
  assert.match(await embed.locator("#kvw-trust").textContent(), /Verified with key/);
  assert.equal(await embed.locator("section.step").count(), 7);
  assert.equal(await embed.locator("section.step:visible").count(), 1);
  await embed.locator("#kvw-next").click();
  await page.waitForSelector("kvw-replay #step-2:visible");
  await shot(page, "embed");
  assert.deepEqual(page.errors, []);
});

test("the compare view highlights the first step where two runs diverge", async () => {
  // Some fixes change nothing in a given scenario; take a comparison that diverges.
  const compare = readdirSync(join(site, "en"))
    .filter((f) => f.startsWith("compare-"))
    .find((f) => readFileSync(join(site, "en", f), "utf8").includes("diverge first"));
  assert.ok(compare, "the site has a compare page of two diverging runs");
  const page = await newPage();
  await page.goto(base + "en/" + compare);
  assert.match(await page.textContent("#kvw-divergence"), /first differ at step \d/);
  assert.equal(await page.locator("tr.diverge.first").count(), 1);
  assert.ok(await page.isVisible("tr.diverge.first"));
  await shot(page, "compare");
});

test("without JavaScript all seven steps are readable", async () => {
  const page = await newPage({ javaScriptEnabled: false });
  await page.goto(base + "index.html");
  assert.equal(await page.locator("section.step:visible").count(), 7);
  assert.equal(await page.isVisible("#kvw-next"), false, "script-only controls stay hidden");
  for (let n = 1; n <= 7; n++) assert.ok(await page.isVisible(`#step-${n} h3`));
  assert.match(await page.textContent("#step-7"), /HTTP \d{3}/);
  await shot(page, "nojs-desktop");
});

test("readable at 360 px wide, with and without JavaScript", async () => {
  for (const js of [true, false]) {
    const page = await newPage({ viewport: { width: 360, height: 800 }, javaScriptEnabled: js });
    await page.goto(base + "it/" + (await firstStem()) + ".html#step-6");
    if (js) await ready(page);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 1, `no horizontal scrolling at 360 px (js ${js}): ${overflow}px`);
    await shot(page, js ? "mobile-360-it-top" : "mobile-360-nojs-top", false);
    await page.locator("#step-6 .pool").scrollIntoViewIfNeeded();
    await shot(page, js ? "mobile-360-it-step6" : "mobile-360-nojs-step6", false);
  }
});

async function firstStem() {
  const index = readFileSync(join(site, "index.html"), "utf8");
  return JSON.parse(index.match(/id="kvw-page">(.*?)<\/script>/s)[1]).receipt;
}
