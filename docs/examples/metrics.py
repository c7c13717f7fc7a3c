"""metrics.py: the durations and gauges a Prometheus server scrapes (run: python metrics.py).

Needs `pip install 'mcpsync[otel]' opentelemetry-sdk opentelemetry-exporter-prometheus`. The same
endpoint is what `mcpsync serve --prometheus HOST:PORT` starts; port 0 takes any free one.
"""
import urllib.request

import mcpsync
from mcpsync import Server, Service
from mcpsync.telemetry import Telemetry

service = Service("weather")


@service.tool
def forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    return f"Sunny in {city}"


telemetry = Telemetry.from_environment(otlp=False, prometheus=("127.0.0.1", 0))
server = Server("weather", services=[service], telemetry=telemetry, workers=4)
try:
    with mcpsync.connect(server) as session:
        for city in ("Lisbon", "Porto"):
            session.call_tool("forecast", {"city": city})
        with urllib.request.urlopen(telemetry.prometheus_url, timeout=10) as response:  # what Prometheus scrapes
            scraped = response.read().decode()
finally:
    server.close()
    telemetry.close()

for line in scraped.splitlines():  # Prometheus's names: dots become underscores, seconds get their suffix
    if line.startswith(("mcp_server_operation_duration_seconds_count{gen_ai_operation_name=\"execute_tool\"", "mcpsync_server_")):
        print(line)
