// page.js: a web page that calls an MCP server directly, with the TypeScript SDK's client.
//
// The page is served from one origin (http://127.0.0.1:PAGE_PORT) and the server listens on
// another, started as `mcpsync serve --http 127.0.0.1:PORT --allow-origin http://127.0.0.1:PAGE_PORT`:
// the browser lets the page read the answers only because mcpsync answers CORS for that origin.
// Bundled for the browser by scripts/peers-browser (esbuild), run by integration/test_browser.py.
//
// Query string: ?server=http://127.0.0.1:PORT/mcp&era=2025-11-25 (the initialize handshake) or
// era=2026-07-28 (negotiated with server/discover; then the page also opens a listen).
// What the page found goes to window.results (and on the page): {ok: true, ...} or {ok: false, error}.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const query = new URLSearchParams(location.search);
const server = new URL(query.get("server"));
const modern = query.get("era") === "2026-07-28";

async function run() {
  const client = new Client(
    { name: "mcpsync-web-page", version: "1.0.0" },
    modern ? { versionNegotiation: { mode: "auto" } } : {},
  );
  const transport = new StreamableHTTPClientTransport(server);
  await client.connect(transport);
  const found = { protocolVersion: client.getNegotiatedProtocolVersion() };

  const { tools } = await client.listTools();
  found.tools = tools.map((tool) => tool.name);

  const echoed = await client.callTool({ name: "echo", arguments: { text: "hello from a web page" } });
  found.echo = echoed.content[0].text;

  const { contents } = await client.readResource({ uri: "notes://welcome" });
  found.resource = contents[0].text;

  if (modern) {
    // A tool whose argument travels in a header too (x-mcp-header: Region). In a browser the
    // client (2.4.0) leaves that header out, and the server refuses the call without it: send it.
    const weather = await client.callTool(
      { name: "region_weather", arguments: { region: "north" } },
      { headers: { "Mcp-Param-Region": "north" } },
    );
    found.weather = weather.content[0].text;

    // Be told when the server's tools change: a listen, open once the server acknowledged it.
    const changed = new Promise((resolve) =>
      client.setNotificationHandler("notifications/tools/list_changed", resolve));
    const listen = await client.listen({ toolsListChanged: true });
    found.honored = listen.honoredFilter;
    await fetch("/listening"); // the test's cue: another client adds a tool now
    await changed;
    found.toolsAfterChange = (await client.listTools()).tools.map((tool) => tool.name);
    await listen.close();
  } else {
    await transport.terminateSession(); // a DELETE: the handshake era's session ends
  }
  await client.close();
  return found;
}

run().then(
  (found) => report({ ok: true, ...found }),
  (error) => report({ ok: false, error: String(error), cause: error.cause ? String(error.cause) : undefined }),
);

function report(results) {
  window.results = results;
  document.querySelector("#output").textContent = JSON.stringify(results, null, 2);
}
