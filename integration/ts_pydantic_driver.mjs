// List and call the pydantic shop's tools (integration/fixtures/pydantic_app.py) through the
// official TypeScript SDK client, and print what it saw as one JSON object.
//
//   node integration/ts_pydantic_driver.mjs SDK_DIR -- python -m mcpsync serve pydantic_app.py
//
// SDK_DIR is the @modelcontextprotocol/sdk package folder (scripts/peers-npm installs it under
// .peers-npm/node_modules). The client's callTool checks a result's structuredContent against the
// tool's outputSchema from the listing itself (with its own JSON Schema validator) and throws when
// they disagree, so a call reported as a result passed that check. Each call's arguments are also
// checked against the tool's inputSchema with that validator (the SDK's Ajv provider). Output:
// {"serverInfo", "tools": [...], "inputValid": {key: bool}, "calls": {key: {"isError", "text",
// "structured"} | {"threw": message}}}; exit 0. Connecting failing: a message on stderr, exit 1.
// Bounded: the whole run has 30 s.
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, dashes, command, ...args] = process.argv.slice(2);
if (!sdkDir || dashes !== "--" || !command) {
  process.stderr.write("usage: ts_pydantic_driver.mjs SDK_DIR -- SERVER_CMD [ARGS...]\n");
  process.exit(2);
}
const load = (file) => import(pathToFileURL(path.join(sdkDir, "dist/esm", file)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { AjvJsonSchemaValidator } = await load("validation/ajv-provider.js");

const ORDER = { customerId: 7, lines: [{ sku: "ABC-1", quantity: 2 }, { sku: "XYZ-42", quantity: 3 }], payment: { kind: "card", last4: "4242" } };
const CALLS = {
  place: ["place_order", { order: ORDER }],
  receipts: ["receipts", { orders: [ORDER, { ...ORDER, customerId: 8, payment: { kind: "voucher", code: "FREE" } }] }],
  ship: ["ship", { parcel: { weight_kg: 2.5, fragile: true } }],
  invalid: ["place_order", { order: { ...ORDER, customerId: 0 } }],
};

const watchdog = setTimeout(() => { process.stderr.write("ts_pydantic_driver: timed out\n"); process.exit(1); }, 30_000);
const client = new Client({ name: "ts-pydantic-driver", version: "0" });
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
try {
  await client.connect(transport);
} catch (error) {
  process.stderr.write(`ts_pydantic_driver: FAILED to connect: ${error}\n`);
  process.exit(1);
}
const report = { serverInfo: client.getServerVersion() };
report.tools = (await client.listTools()).tools;
const schemas = new AjvJsonSchemaValidator();
const inputSchemas = Object.fromEntries(report.tools.map((tool) => [tool.name, tool.inputSchema]));
report.inputValid = Object.fromEntries(Object.entries(CALLS).map(([key, [name, callArgs]]) => [key, schemas.getValidator(inputSchemas[name])(callArgs).valid]));
report.calls = {};
for (const [key, [name, callArgs]] of Object.entries(CALLS)) {
  try {
    const result = await client.callTool({ name, arguments: callArgs });
    const text = result.content.filter((block) => block.type === "text").map((block) => block.text).join(" ");
    report.calls[key] = { isError: Boolean(result.isError), text, structured: result.structuredContent ?? null };
  } catch (error) {
    report.calls[key] = { threw: String(error) };
  }
}
await client.close();
clearTimeout(watchdog);
process.stdout.write(JSON.stringify(report) + "\n");
