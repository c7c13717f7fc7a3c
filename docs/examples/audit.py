"""audit.py: an interceptor that audits and refuses requests (run: python audit.py)."""
import logging
import time

from mcpsync import Call, Interceptor, McpError, Server, Service, ToolCall

log = logging.getLogger("audit")
service = Service("ops")


@service.tool
def deploy(env: str) -> str:
    """Deploy to an environment."""
    return f"deployed to {env}"


class Audit(Interceptor):
    def before_execute(self, call: Call):
        if call.method == "tools/call" and call.params.get("arguments", {}).get("env") == "prod":
            # application-defined codes lie outside -32768..-32000
            raise McpError(-31001, "production deploys are not allowed from MCP")
        return None  # go on

    def after_execute(self, call: Call, outcome):
        log.info("%s (%s era) -> %s", call.method, call.era.value, type(outcome).__name__)
        return outcome

    def around_tool_call(self, tool_call: ToolCall, proceed):
        started = time.perf_counter()
        result = proceed(tool_call)
        log.info("tool %s took %.1f ms", tool_call.name, (time.perf_counter() - started) * 1000)
        return result


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)  # logs go to stderr
    Server("ops", services=[service], interceptors=[Audit()]).serve_stdio()
