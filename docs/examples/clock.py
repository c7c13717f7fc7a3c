"""clock.py: a server whose resource changes every second (run: mcpsync serve clock.py)."""
import threading
import time

from mcpsync import Server, Service

service = Service("clock")
server = Server("clock", services=[service])


@service.resource("clock://now", mime_type="text/plain")
def now() -> str:
    """The time of day."""
    return time.strftime("%H:%M:%S")


@service.tool
def add_alarm(at: str) -> str:
    """Add a tool named alarm_HHMM."""
    name = "alarm_" + at.replace(":", "")
    service.tool(lambda: f"ring at {at}", name=name, description=f"The alarm at {at}.")
    return name


def tick() -> None:
    while True:
        time.sleep(1)
        server.notify_resource_updated("clock://now")


threading.Thread(target=tick, daemon=True).start()
