"""notes.py: a complete mcpsync server (run: python notes.py)."""
from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

from mcpsync import Context, Server, Service, ToolError

service = Service("notes", instructions="Keeps short notes in memory.")
NOTES: dict[str, str] = {"todo": "buy milk"}


@service.tool
def greet(name: str, punctuation: Literal["!", "."] = "!") -> str:
    """Greet someone by name."""
    return f"Hello, {name}{punctuation}"


@dataclasses.dataclass
class Stats:
    count: int
    longest: str | None


@service.tool(annotations={"readOnlyHint": True})
def note_stats() -> Stats:
    """Count the notes and name the longest one."""
    longest = max(NOTES, key=lambda key: len(NOTES[key]), default=None)
    return Stats(len(NOTES), longest)


@service.tool
def import_notes(ctx: Context, lines: list[str]) -> str:
    """Import notes given as 'key: text' lines, reporting progress.

    Args:
        lines: the notes, one 'key: text' per entry.
    """
    for done, line in enumerate(lines, 1):
        if ctx.cancelled:                      # the client sent notifications/cancelled
            return f"cancelled after {done - 1} notes"
        key, sep, text = line.partition(":")
        if not sep:
            raise ToolError(f"line {done} has no ':'")  # isError: true, seen by the model
        NOTES[key.strip()] = text.strip()
        ctx.progress(done, len(lines))         # sent only if the request had a progressToken
        ctx.info(f"imported {key.strip()}")    # notifications/message, if the client wants info
    return f"imported {len(lines)} notes"


@service.prompt(complete={"key": lambda value, _arguments: [k for k in NOTES if k.startswith(value)]})
def summarize(key: Annotated[str, "which note to summarize"]) -> str:
    """Ask the model to summarize one note."""
    return f"Summarize this note in one sentence:\n\n{NOTES.get(key, '')}"


@service.resource("notes://index", mime_type="application/json")
def index() -> list[str]:
    """The keys of all notes."""
    return sorted(NOTES)


@service.resource("notes://note/{key}", mime_type="text/plain")
def note(key: str) -> str:
    """One note's text."""
    return NOTES.get(key, "")


if __name__ == "__main__":
    Server("notes", services=[service]).serve_stdio()
