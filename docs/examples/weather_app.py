"""weather_app.py: an MCP App (a tool with a page of its own) and an extension of the server's own (run: python weather_app.py)."""
import mcpsync
from mcpsync import Extension, Server, Service, apps

PAGE = """<!doctype html>
<html><body><h1 id="sky">...</h1>
<script>  // the host hands the page the tool's result; here, what it shows
  window.addEventListener("message", (event) => {
    const result = event.data?.params?.structuredContent;
    if (result) document.getElementById("sky").textContent = `${result.city}: ${result.sky}`;
  });
</script></body></html>"""

service = Service("weather")


@service.tool(meta=apps.tool_meta("ui://weather/forecast"))
def forecast(city: str) -> dict:
    """Tomorrow's weather in a city, with a page to show it."""
    return {"city": city, "sky": "sunny"}


apps.add_page(service, "ui://weather/forecast", PAGE, name="forecast-page", csp={"resource_domains": ["https://cdn.example.com"]})
stations = Extension("com.example/stations", {"count": 1}, {"stations/list": lambda params, ctx: {"stations": ["Lisbon"]}})
server = Server("weather", services=[service], extensions=[apps.UI_EXTENSION, stations])

# A host that renders apps declares the extension; it reads the page the tool names.
with mcpsync.connect(server, extensions={apps.UI: {"mimeTypes": [apps.APP_MIME_TYPE]}}) as host:
    print(sorted(host.server_extensions))
    [tool] = host.list_tools()
    page = host.read_resource(tool["_meta"]["ui"]["resourceUri"])["contents"][0]
    print(page["mimeType"], page["_meta"]["ui"]["csp"])
    print(host.request("stations/list")["stations"])

# A client that does not: the same tool, and its text.
with mcpsync.connect(server) as plain:
    print(plain.call_tool("forecast", {"city": "Lisbon"})["content"][0]["text"])
