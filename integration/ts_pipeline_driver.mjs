// Many calls in flight at once from the official TypeScript SDK client over stdio, against
// `mcpsync serve` (the demo), and print what it saw as one JSON object.
//
//   node integration/ts_pipeline_driver.mjs SDK_DIR CALLS -- python -m mcpsync serve
//
// SDK_DIR is the @modelcontextprotocol/sdk package folder (scripts/peers-npm installs it under
// .peers-npm/node_modules). One Promise.all holds, written to the pipe together: CALLS `echo` calls
// (each its own text), CALLS/10 `add` calls, a `countdown` of 3 steps reporting progress (read by
// the SDK's onprogress; the SDK reads a notification a microtask later than a response, so a last
// progress that reaches it in one chunk with the answer is dropped by the SDK itself), a
// `countdown` of 50 steps cancelled through its AbortSignal once the
// quick calls are answered, and a `tools/list`. Output: {"echoed": [texts in answer order],
// "echoWrong": [...], "sums": {ok, wrong}, "progress": [[progress, total]...], "countdown",
// "cancelled": the rejection's message, "quickBeforeSlow": whether every quick answer came before
// the 3-step countdown's, "tools": names, "after": an echo answered after it all}; exit 0.
// Connecting failing: a message on stderr, exit 1. Bounded: the whole run has 60 s.
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, callsText, dashes, command, ...args] = process.argv.slice(2);
const calls = Number(callsText);
if (!sdkDir || !(calls > 0) || dashes !== "--" || !command) {
  process.stderr.write("usage: ts_pipeline_driver.mjs SDK_DIR CALLS -- SERVER_CMD [ARGS...]\n");
  process.exit(2);
}
const load = (file) => import(pathToFileURL(path.join(sdkDir, "dist/esm", file)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");

const watchdog = setTimeout(() => { process.stderr.write("ts_pipeline_driver: timed out\n"); process.exit(1); }, 60_000);
const client = new Client({ name: "ts-pipeline-driver", version: "0" });
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
try {
  await client.connect(transport);
} catch (error) {
  process.stderr.write(`ts_pipeline_driver: FAILED to connect: ${error}\n`);
  process.exit(1);
}

const textOf = (result) => result.content.filter((block) => block.type === "text").map((block) => block.text).join("");
const report = { echoed: [], echoWrong: [], sums: { ok: 0, wrong: 0 }, progress: [] };
let answered = 0;
let slowAnsweredAt = null;
let quickAnswered = null;
const allQuickAnswered = new Promise((resolve) => { quickAnswered = resolve; });
const quickTotal = calls + Math.floor(calls / 10);
const quickDone = () => { answered += 1; if (answered === quickTotal) quickAnswered(); };

const aborter = new AbortController();
const options = { timeout: 30_000 };
const quick = [];
for (let i = 0; i < calls; i++) {
  const text = `call ${i} ${"x".repeat(i % 97)}`;
  quick.push(client.callTool({ name: "echo", arguments: { text } }, undefined, options).then((result) => {
    const got = textOf(result);
    report.echoed.push(got);
    if (got !== text || result.isError) report.echoWrong.push({ sent: text, got, isError: Boolean(result.isError) });
    quickDone();
  }));
  if (i % 10 === 9) {
    const a = i, b = 1000 - i;
    quick.push(client.callTool({ name: "add", arguments: { a, b } }, undefined, options).then((result) => {
      if (textOf(result) === String(a + b)) report.sums.ok += 1; else report.sums.wrong += 1;
      quickDone();
    }));
  }
}
const slow = client.callTool({ name: "countdown", arguments: { steps: 3, delay: 0.2 } }, undefined, {
  ...options, onprogress: (p) => report.progress.push([p.progress, p.total]),
}).then((result) => { slowAnsweredAt = answered; report.countdown = textOf(result); });
const cancelled = client.callTool({ name: "countdown", arguments: { steps: 50, delay: 0.2 } }, undefined, { ...options, signal: aborter.signal })
  .then((result) => { report.cancelled = `answered: ${textOf(result)}`; }, (error) => { report.cancelled = String(error?.message ?? error); });
const listed = client.listTools().then((result) => { report.tools = result.tools.map((tool) => tool.name).sort(); });
allQuickAnswered.then(() => aborter.abort("enough"));

await Promise.all([...quick, slow, cancelled, listed]);
report.quickBeforeSlow = slowAnsweredAt === quickTotal;
report.after = textOf(await client.callTool({ name: "echo", arguments: { text: "after" } }, undefined, options));
await client.close();
clearTimeout(watchdog);
process.stdout.write(JSON.stringify(report) + "\n");
