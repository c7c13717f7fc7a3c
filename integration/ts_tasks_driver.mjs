// Drive mcpsync's 2025-11-25 tasks through the official TypeScript SDK's experimental tasks client
// (`client.experimental.tasks`, the package's `@modelcontextprotocol/sdk/experimental/tasks`) and
// print what it saw as one JSON object.
//
//   node integration/ts_tasks_driver.mjs SDK_DIR --url http://127.0.0.1:PORT/mcp
//   node integration/ts_tasks_driver.mjs SDK_DIR -- python -m mcpsync serve tasks_app.py
//
// SDK_DIR is the @modelcontextprotocol/sdk package folder (scripts/peers-npm installs it under
// .peers-npm/node_modules). The server is integration/fixtures/tasks_app.py. Each scenario runs
// in turn on one connection and reports what a program using the SDK gets back: statuses, results,
// the errors the SDK raises ({code, message, data}), the message types of callToolStream, what the
// elicitation callback was asked. A scenario that throws is reported as {"threw": ..., "stack"}
// and the rest still run. Besides: "wire", what crossed the connection that the SDK's API does not
// show (the negotiated version, the raw elicitation requests and task progress notifications).
// Exit 0 with the report; connecting failing: a message on stderr, exit 1. Bounded: 90 s in all,
// and each request its own REQUEST_MS.
import { pathToFileURL } from "node:url";
import path from "node:path";
import { randomUUID } from "node:crypto";

const [sdkDir, how, ...rest] = process.argv.slice(2);
if (!sdkDir || !((how === "--url" && rest.length === 1) || (how === "--" && rest.length >= 1))) {
  process.stderr.write("usage: ts_tasks_driver.mjs SDK_DIR (--url URL | -- SERVER_CMD [ARGS...])\n");
  process.exit(2);
}
const load = (file) => import(pathToFileURL(path.join(sdkDir, "dist/esm", file)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { CallToolResultSchema, ElicitRequestSchema, McpError } = await load("types.js");
const { CreateTaskResultSchema } = await load("experimental/tasks/index.js");

const REQUEST_MS = 20_000; // any one request, tasks/result included
const DEADLINE_MS = 20_000; // any one wait of the driver's own (polling, a progress notification)
const LIST_EXTRA = 101; // tasks made for the listing: more than the server's page (100 by default)
const TERMINAL = ["completed", "failed", "cancelled"];

const watchdog = setTimeout(() => { process.stderr.write("ts_tasks_driver: timed out\n"); process.exit(1); }, 90_000);

// -- the connection, with a record of what crossed it ---------------------------------------------
const wire = { protocolVersion: null, elicitations: [], progress: [] };
const transport = how === "--url"
  ? new StreamableHTTPClientTransport(new URL(rest[0]))
  : new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, stderr: "inherit" });
let deliver = null;
Object.defineProperty(transport, "onmessage", {
  configurable: true,
  get: () => (deliver ? observe : undefined),
  set: (fn) => { deliver = fn; },
});
function observe(message, extra) {
  if (message.result?.protocolVersion) wire.protocolVersion = message.result.protocolVersion;
  if (message.method === "elicitation/create") wire.elicitations.push(message.params);
  if (message.method === "notifications/progress") wire.progress.push(message.params);
  deliver(message, extra);
}

const client = new Client({ name: "ts-tasks-driver", version: "0" }, { capabilities: { elicitation: { form: {} } } });
// The elicitation callback: a question the scenario holds (`held`, by its message) waits for its
// release; any other is answered at once, declined when it names "keep", else confirmed.
const asked = []; // the params of every elicitation/create, in order
const held = new Map();
client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
  asked.push(request.params);
  const hang = held.get(request.params.message);
  if (hang) {
    held.delete(request.params.message); // asked again, it is answered at once
    hang.asked({ aborted: new Promise((resolve) => extra.signal.addEventListener("abort", () => resolve(true))) });
    await hang.answer;
  }
  const keep = request.params.message.includes("keep");
  return keep ? { action: "decline" } : { action: "accept", content: { confirm: true } };
});
try {
  await client.connect(transport);
} catch (error) {
  process.stderr.write(`ts_tasks_driver: FAILED to connect: ${error}\n`);
  process.exit(1);
}
const tasks = client.experimental.tasks;
const opts = { timeout: REQUEST_MS };
const created = []; // every task id this run made, for the listing

// -- helpers ----------------------------------------------------------------------------------
const errorOf = (error) => (error instanceof McpError
  ? { code: error.code, message: error.message, data: error.data ?? null }
  : { notMcpError: String(error) });

async function outcome(promise) {
  try {
    return { value: await promise };
  } catch (error) {
    return { error: errorOf(error) };
  }
}

function createTask(name, args, extra = {}) {
  return client.request({ method: "tools/call", params: { name, arguments: args } }, CreateTaskResultSchema,
    { ...opts, task: { ttl: 60_000 }, ...extra });
}

async function pollUntil(taskId, done) {
  const seen = [];
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const task = await tasks.getTask(taskId, opts);
    if (seen.at(-1) !== task.status) seen.push(task.status);
    if (done(task)) return { seen, last: task };
    if (Date.now() > deadline) throw new Error(`task ${taskId} still ${task.status} after ${DEADLINE_MS} ms (seen ${seen})`);
    await new Promise((resolve) => setTimeout(resolve, task.pollInterval ?? 100));
  }
}

async function streamed(params, options = {}) {
  const messages = [];
  for await (const message of tasks.callToolStream(params, CallToolResultSchema, { ...opts, ...options })) {
    if (message.type === "error") messages.push({ type: "error", error: errorOf(message.error) });
    else if (message.type === "result") messages.push({ type: "result", result: message.result });
    else messages.push({ type: message.type, task: message.task });
  }
  return messages;
}

function withDeadline(promise, what) {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`no ${what} within ${DEADLINE_MS} ms`)), DEADLINE_MS); });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// A required task whose question the elicitation callback holds until `hang.release()`; returns
// once the task waits for input (`seen`: the statuses polled until then), with `hang.asking`:
// resolves once a tasks/result carried the question, to `{aborted}`, a promise of the callback's
// abort signal (the server withdrawing its question).
async function askAndHang() {
  const filename = `hang-${randomUUID()}.txt`;
  const hang = {};
  let carried;
  hang.asking = new Promise((resolve) => { carried = resolve; });
  hang.answer = new Promise((resolve) => { hang.release = resolve; });
  held.set(`Delete ${filename}?`, { asked: carried, answer: hang.answer });
  const { task } = await createTask("confirm_delete", { filename });
  created.push(task.taskId);
  const { seen } = await pollUntil(task.taskId, (t) => t.status !== "working");
  hang.asking = withDeadline(hang.asking, "elicitation on tasks/result");
  return { task, filename, hang, seen };
}

// -- the scenarios ----------------------------------------------------------------------------
const scenarios = {
  async handshake() {
    const listed = await client.listTools(undefined, opts);
    return {
      capabilities: client.getServerCapabilities(),
      serverInfo: client.getServerVersion(),
      taskSupport: Object.fromEntries(listed.tools.map((tool) => [tool.name, tool.execution?.taskSupport ?? null])),
    };
  },

  async poll() {
    const { task } = await createTask("slow", { steps: 3 });
    created.push(task.taskId);
    const { seen, last } = await pollUntil(task.taskId, (t) => TERMINAL.includes(t.status));
    const result = await tasks.getTaskResult(task.taskId, CallToolResultSchema, opts);
    return { created: task, seen, last, result };
  },

  async progress() {
    const hold = `progress-${randomUUID()}`;
    const heard = [];
    let heardOne;
    const first = new Promise((resolve) => { heardOne = resolve; });
    const { task } = await createTask("slow", { steps: 2, hold }, { onprogress: (p) => { heard.push(p); heardOne(); } });
    created.push(task.taskId);
    const result = tasks.getTaskResult(task.taskId, CallToolResultSchema, opts);
    await withDeadline(first, "progress notification on tasks/result");
    const released = await client.callTool({ name: "release", arguments: { hold } }, CallToolResultSchema, opts);
    return { taskId: task.taskId, result: await result, released, heard, last: await tasks.getTask(task.taskId, opts) };
  },

  async stream() {
    const messages = await streamed({ name: "slow", arguments: { steps: 2 } });
    created.push(messages[0]?.task?.taskId);
    return { messages };
  },

  async elicitation() {
    const from = asked.length;
    const accepted = await streamed({ name: "confirm_delete", arguments: { filename: "notes.txt" } });
    const declined = await streamed({ name: "confirm_delete", arguments: { filename: "keep.txt" } });
    created.push(accepted[0]?.task?.taskId, declined[0]?.task?.taskId);
    const after = accepted[0]?.task ? await tasks.getTask(accepted[0].task.taskId, opts) : null;
    return { accepted, declined, asked: asked.slice(from), after };
  },

  async cancel() {
    const { task } = await createTask("slow", { steps: 1, hold: `never-${randomUUID()}` });
    created.push(task.taskId);
    const before = await tasks.getTask(task.taskId, opts);
    const cancelled = await outcome(tasks.cancelTask(task.taskId, opts));
    const after = await tasks.getTask(task.taskId, opts);
    const again = await outcome(tasks.cancelTask(task.taskId, opts));
    const result = await outcome(tasks.getTaskResult(task.taskId, CallToolResultSchema, opts));
    return { created: task, before, cancelled, after, again, result };
  },

  async cancelWhileAsking() {
    const { task, seen, hang } = await askAndHang();
    const result = outcome(tasks.getTaskResult(task.taskId, CallToolResultSchema, opts));
    const { aborted } = await hang.asking;
    const cancelled = await outcome(tasks.cancelTask(task.taskId, opts));
    const resultAfterCancel = await result;
    const questionWithdrawn = await outcome(withDeadline(aborted, "withdrawal of the elicitation"));
    hang.release();
    return { seen, cancelled, resultAfterCancel, questionWithdrawn, after: await tasks.getTask(task.taskId, opts) };
  },

  async resumeAsking() {
    const { task, filename, hang } = await askAndHang();
    const first = new AbortController();
    const abandoned = outcome(tasks.getTaskResult(task.taskId, CallToolResultSchema, { ...opts, signal: first.signal }));
    const { aborted } = await hang.asking;
    first.abort("the user closed the dialog");
    const firstResult = await abandoned;
    const questionWithdrawn = await outcome(withDeadline(aborted, "withdrawal of the elicitation"));
    hang.release();
    const during = await tasks.getTask(task.taskId, opts);
    const result = await outcome(tasks.getTaskResult(task.taskId, CallToolResultSchema, opts));
    return { firstResult, questionWithdrawn, during, result, timesAsked: asked.filter((p) => p.message === `Delete ${filename}?`).length };
  },

  async twoWaiters() {
    const { task, filename, hang } = await askAndHang();
    const first = new AbortController();
    const abandoned = outcome(tasks.getTaskResult(task.taskId, CallToolResultSchema, { ...opts, signal: first.signal }));
    const { aborted } = await hang.asking;
    const second = outcome(tasks.getTaskResult(task.taskId, CallToolResultSchema, opts));
    await client.ping(opts); // the second tasks/result went out before it
    first.abort("the first window closed");
    const firstResult = await abandoned;
    const questionWithdrawn = await outcome(withDeadline(aborted, "withdrawal of the elicitation"));
    hang.release();
    return { firstResult, questionWithdrawn, secondResult: await second, timesAsked: asked.filter((p) => p.message === `Delete ${filename}?`).length };
  },

  async failures() {
    const failing = (await createTask("failing", {})).task;
    const protocol = (await createTask("protocol_error", {})).task;
    created.push(failing.taskId, protocol.taskId);
    const failingResult = await outcome(tasks.getTaskResult(failing.taskId, CallToolResultSchema, opts));
    const protocolResult = await outcome(tasks.getTaskResult(protocol.taskId, CallToolResultSchema, opts));
    const stream = await streamed({ name: "failing", arguments: {} });
    created.push(stream[0]?.task?.taskId);
    return {
      failing: { result: failingResult, task: await tasks.getTask(failing.taskId, opts) },
      protocolError: { result: protocolResult, task: await tasks.getTask(protocol.taskId, opts) },
      stream,
    };
  },

  async refusals() {
    const raw = (name, args, extra = {}) => outcome(client.request({ method: "tools/call", params: { name, arguments: args } },
      extra.task ? CreateTaskResultSchema : CallToolResultSchema, { ...opts, ...extra }));
    return {
      requiredViaCallTool: await outcome(client.callTool({ name: "confirm_delete", arguments: { filename: "x" } }, CallToolResultSchema, opts)),
      requiredWithoutTask: await raw("confirm_delete", { filename: "x" }),
      forbiddenWithTask: await raw("greet", { name: "Ada" }, { task: { ttl: 60_000 } }),
      optionalWithoutTask: await outcome(client.callTool({ name: "slow", arguments: { steps: 1 } }, CallToolResultSchema, opts)),
      plain: await outcome(client.callTool({ name: "greet", arguments: { name: "Ada" } }, CallToolResultSchema, opts)),
      unknownGet: await outcome(tasks.getTask("no-such-task", opts)),
      unknownResult: await outcome(tasks.getTaskResult("no-such-task", CallToolResultSchema, opts)),
      unknownCancel: await outcome(tasks.cancelTask("no-such-task", opts)),
      badCursor: await outcome(tasks.listTasks("no-such-cursor", opts)),
    };
  },

  async list() {
    for (let i = 0; i < LIST_EXTRA; i++) created.push((await createTask("slow", { steps: 0 })).task.taskId);
    const pages = [];
    let cursor;
    do {
      const page = await tasks.listTasks(cursor, opts);
      pages.push({ ids: page.tasks.map((t) => t.taskId), statuses: [...new Set(page.tasks.map((t) => t.status))], nextCursor: page.nextCursor ?? null });
      cursor = page.nextCursor;
    } while (cursor && pages.length < 100);
    const listed = pages.flatMap((page) => page.ids);
    const mine = created.filter(Boolean);
    return {
      pageSizes: pages.map((page) => page.ids.length),
      cursors: pages.map((page) => page.nextCursor),
      statuses: [...new Set(pages.flatMap((page) => page.statuses))].sort(),
      listed: listed.length,
      distinct: new Set(listed).size,
      missing: mine.filter((id) => !listed.includes(id)),
      made: mine.length,
    };
  },
};

const report = {};
for (const [name, run] of Object.entries(scenarios)) {
  try {
    report[name] = await run();
  } catch (error) {
    report[name] = { threw: String(error), stack: error?.stack ?? null };
  }
}
report.wire = wire;
await client.close();
clearTimeout(watchdog);
process.stdout.write(JSON.stringify(report) + "\n");
