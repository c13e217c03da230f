// First-screen pictures of a built site, for comparing builds by eye:
//   node first-screen.mjs URL OUT_DIR PREFIX
// writes PREFIX-1280x900[-nojs].png and PREFIX-390x844[-nojs].png of URL.
import { chromium } from "playwright-core";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url, out, prefix] = process.argv.slice(2);
if (!url || !out || !prefix) {
  console.error("usage: node first-screen.mjs URL OUT_DIR PREFIX");
  process.exit(2);
}
for (const js of [true, false]) {
  for (const [width, height] of [[1280, 900], [390, 844]]) {
    const context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "kvw-shot-")), {
      executablePath: "/usr/bin/chromium",
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
      viewport: { width, height },
      javaScriptEnabled: js,
    });
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(url, { waitUntil: "load", timeout: 30_000 });
    if (js) await page.waitForTimeout(3_000);
    const file = join(out, `${prefix}-${width}x${height}${js ? "" : "-nojs"}.png`);
    await page.screenshot({ path: file });
    console.log(file);
    await context.close();
  }
}
