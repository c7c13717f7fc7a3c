// A 2025-11-25 task server built on the official TypeScript SDK (v1, its experimental tasks API):
// the peer mcpsync's client is proved against for tasks it does not run itself.
//
//   node integration/ts_tasks_server.mjs SDK_DIR stdio
//   node integration/ts_tasks_server.mjs SDK_DIR http PORT      (PORT 0: any free port)
//
// SDK_DIR is the @modelcontextprotocol/sdk package folder (scripts/peers-npm installs it under
// .peers-npm/node_modules, zod beside it). Over HTTP it serves Streamable HTTP at
// http://127.0.0.1:PORT/mcp, one SDK server per session, and says on stderr, once listening,
// "serving MCP over HTTP at URL" (the line `mcpsync serve --http` writes, so one reader finds both).
//
// Tools (the SDK's McpServer; the tasks ones through `experimental.tasks.registerToolTask`, their
// records in one InMemoryTaskStore shared by the sessions, each bound to its session by the SDK):
// - `slow_compute(seconds)`, taskSupport "optional": completes after `seconds` with
//   "done after Ns". Called without `task`, the SDK runs it as a task anyway and answers the call
//   with its result once done.
// - `confirm_delete(filename)`, taskSupport "required": asks the client (form elicitation, queued
//   on the task and carried by the client's `tasks/result`, with related-task `_meta`), then
//   completes with "Deleted FILENAME" on an accepted `confirm: true`, else "Kept FILENAME".
// - `greet(name)`: an ordinary tool.
// Tasks suggest polling every 100 ms. Called without `task`, a required tool gets the SDK's own
// answer: a tool result with isError and -32601 in its text, not a JSON-RPC error.
import { createRequire } from "node:module";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, mode, port] = process.argv.slice(2);
if (!sdkDir || !(mode === "stdio" || (mode === "http" && /^\d+$/.test(port ?? "")))) {
  process.stderr.write("usage: ts_tasks_server.mjs SDK_DIR (stdio | http PORT)\n");
  process.exit(2);
}
const load = (file) => import(pathToFileURL(path.join(sdkDir, "dist/esm", file)).href);
const zodDir = path.dirname(createRequire(path.resolve(sdkDir, "package.json")).resolve("zod/package.json"));
const z = await import(pathToFileURL(path.join(zodDir, "v4/index.js")).href);
const { McpServer } = await load("server/mcp.js");
const { ElicitResultSchema, isInitializeRequest } = await load("types.js");
const { InMemoryTaskStore, InMemoryTaskMessageQueue } = await load("experimental/tasks/index.js");

const POLL_MS = 100;
const TTL_MS = 60_000;
const taskStore = new InMemoryTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();

// The callbacks every task tool shares: the SDK's store answers tasks/get and tasks/result.
const fromStore = {
  getTask: async (_args, extra) => await extra.taskStore.getTask(extra.taskId),
  getTaskResult: async (_args, extra) => await extra.taskStore.getTaskResult(extra.taskId),
};

function buildServer() {
  const server = new McpServer({ name: "ts-tasks-server", version: "1.0.0" }, {
    capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
    taskStore,
    taskMessageQueue,
  });
  server.registerTool("greet", { description: "Say hello.", inputSchema: { name: z.string() } },
    async ({ name }) => ({ content: [{ type: "text", text: `Hello, ${name}!` }] }));
  server.experimental.tasks.registerToolTask("slow_compute", {
    description: "Compute for a while.",
    inputSchema: { seconds: z.number().min(0) },
    execution: { taskSupport: "optional" },
  }, {
    async createTask({ seconds }, extra) {
      const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? TTL_MS, pollInterval: POLL_MS });
      setTimeout(() => {
        extra.taskStore.storeTaskResult(task.taskId, "completed", { content: [{ type: "text", text: `done after ${seconds}s` }] })
          .catch(() => {}); // cancelled or expired meanwhile: nothing to keep
      }, seconds * 1000);
      return { task };
    },
    ...fromStore,
  });
  server.experimental.tasks.registerToolTask("confirm_delete", {
    description: "Delete a file once the user confirms.",
    inputSchema: { filename: z.string() },
    execution: { taskSupport: "required" },
  }, {
    async createTask({ filename }, extra) {
      const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? TTL_MS, pollInterval: POLL_MS });
      const ask = {
        method: "elicitation/create",
        params: {
          mode: "form",
          message: `Delete ${filename}?`,
          requestedSchema: { type: "object", properties: { confirm: { type: "boolean" } }, required: ["confirm"] },
        },
      };
      (async () => {
        const answer = await extra.sendRequest(ask, ElicitResultSchema, { relatedTask: { taskId: task.taskId } });
        await extra.taskStore.updateTaskStatus(task.taskId, "working"); // the SDK leaves it input_required
        const confirmed = answer.action === "accept" && answer.content?.confirm === true;
        await extra.taskStore.storeTaskResult(task.taskId, "completed",
          { content: [{ type: "text", text: confirmed ? `Deleted ${filename}` : `Kept ${filename}` }] });
      })().catch(() => {}); // cancelled, expired or the client went away: the store says so already
      return { task };
    },
    ...fromStore,
  });
  return server;
}

if (mode === "stdio") {
  const { StdioServerTransport } = await load("server/stdio.js");
  await buildServer().connect(new StdioServerTransport());
} else {
  const { StreamableHTTPServerTransport } = await load("server/streamableHttp.js");
  const { createMcpExpressApp } = await load("server/express.js");
  const app = createMcpExpressApp();
  const sessions = {};
  app.post("/mcp", async (req, res) => {
    let transport = sessions[req.headers["mcp-session-id"]];
    if (!transport && !req.headers["mcp-session-id"] && isInitializeRequest(req.body)) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => { sessions[id] = transport; },
      });
      transport.onclose = () => { delete sessions[transport.sessionId]; };
      await buildServer().connect(transport);
    }
    if (!transport) {
      res.status(404).json({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null });
      return;
    }
    await transport.handleRequest(req, res, req.body);
  });
  const existing = async (req, res) => {
    const transport = sessions[req.headers["mcp-session-id"]];
    if (!transport) {
      res.status(404).send("Session not found");
      return;
    }
    await transport.handleRequest(req, res);
  };
  app.get("/mcp", existing);
  app.delete("/mcp", existing);
  const listener = app.listen(Number(port), "127.0.0.1", () => {
    process.stderr.write(`serving MCP over HTTP at http://127.0.0.1:${listener.address().port}/mcp\n`);
  });
  listener.on("error", (error) => {
    process.stderr.write(`ts_tasks_server: cannot listen on 127.0.0.1:${port}: ${error}\n`);
    process.exit(1);
  });
}
