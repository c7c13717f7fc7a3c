"""shout.py: the `web` upstream of gateway.toml (run: mcpsync serve shout.py --http 127.0.0.1:8000)."""
from mcpsync import Service

service = Service("shout")


@service.tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()
