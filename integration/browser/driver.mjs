// driver.mjs: open a page in headless Chromium and print what it reported, as one JSON line.
//
//   node integration/browser/driver.mjs PEERS_DIR CHROMIUM URL [TIMEOUT_MS]
//
// PEERS_DIR is what scripts/peers-browser printed (playwright-core is in its node_modules);
// CHROMIUM is the browser to launch (Debian's /usr/bin/chromium: playwright-core downloads none).
// The page sets window.results when it is done (integration/browser/page.js). The driver waits for
// it (at most TIMEOUT_MS, default 30000), then prints {results, console, pageErrors, failedRequests,
// responses} on stdout: `console` holds every console message (the browser's own CORS refusals
// show there), `responses` the status and headers of every response the page received.
// Exit status: 0 when the page reported (whatever it reported), 1 when it did not in time or the
// browser failed; the JSON line is printed either way.
import { createRequire } from "node:module";
import path from "node:path";

const [peersDir, chromium, url, timeoutArg] = process.argv.slice(2);
if (!peersDir || !chromium || !url) {
  console.error("usage: node driver.mjs PEERS_DIR CHROMIUM URL [TIMEOUT_MS]");
  process.exit(2);
}
const timeout = Number(timeoutArg ?? 30000);
const { chromium: launcher } = createRequire(path.join(peersDir, "package.json"))("playwright-core");

const out = { results: null, console: [], pageErrors: [], failedRequests: [], responses: [] };
const pending = [];
let browser;
let status = 1;
try {
  browser = await launcher.launch({ executablePath: chromium, headless: true, timeout });
  const page = await browser.newPage();
  page.on("console", (message) => out.console.push(`${message.type()}: ${message.text()}`));
  page.on("pageerror", (error) => out.pageErrors.push(String(error)));
  page.on("requestfailed", (request) =>
    out.failedRequests.push({ method: request.method(), url: request.url(), error: request.failure()?.errorText }));
  page.on("response", (response) => {
    const request = response.request();
    pending.push(Promise.all([request.allHeaders(), response.allHeaders()]).then(
      ([requestHeaders, headers]) => out.responses.push({
        method: request.method(), url: response.url(), status: response.status(), requestHeaders, headers,
      }),
      () => {},
    ));
  });
  await page.goto(url, { timeout });
  await page.waitForFunction(() => window.results !== undefined, null, { timeout });
  out.results = await page.evaluate(() => window.results);
  status = 0;
} catch (error) {
  out.error = String(error);
} finally {
  await Promise.allSettled(pending);
  if (browser) await browser.close().catch(() => {});
}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(status);
