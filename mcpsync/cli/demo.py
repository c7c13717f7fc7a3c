"""The embedded demo service: what `mcpsync serve` runs when given nothing else.

Strategy: small, useful, and a tour of the service API: plain and structured tool results, progress
with cancellation, a tool error, a prompt with completable arguments, a static resource and a
resource template.
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass

from ..catalog.content import ToolError
from ..catalog.context import Context
from ..catalog.service import Service

LANGUAGES = ("c", "go", "java", "javascript", "python", "rust", "typescript")
NAMES = ("Ada", "Alan", "Barbara", "Grace", "Guido", "Linus")

README = """# mcpsync demo

This server is mcpsync's embedded demo service. Try:

- `echo` and `add` for plain results, `word_stats` for structured output,
- `countdown` with a progress token (and cancel it half-way),
- `fail` to see a tool error,
- the `review_code` prompt, and `demo://greeting/{name}`.
"""


@dataclass
class WordStats:
    """Counts for a piece of text."""

    words: int
    characters: int
    lines: int
    most_common: list[str]


def build_demo_service() -> Service:
    """A fresh demo service (each server gets its own, so nothing is shared between them)."""
    service = Service("demo", instructions="A demo of mcpsync: echo, arithmetic, text statistics, progress.")

    @service.tool(annotations={"readOnlyHint": True, "idempotentHint": True})
    def echo(text: str) -> str:
        """Return the given text unchanged."""
        return text

    @service.tool(annotations={"readOnlyHint": True, "idempotentHint": True})
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first addend.
            b: the second addend.
        """
        return a + b

    @service.tool(annotations={"readOnlyHint": True, "idempotentHint": True})
    def word_stats(text: str, top: int = 3) -> WordStats:
        """Count the words, characters and lines of a text, and name its most common words.

        Args:
            text: the text to analyse.
            top: how many of the most common words to report.
        """
        words = re.findall(r"[\w']+", text.lower())
        common = [word for word, _ in collections.Counter(words).most_common(max(0, top))]
        return WordStats(len(words), len(text), text.count("\n") + 1 if text else 0, common)

    @service.tool
    def countdown(ctx: Context, steps: int = 5, delay: float = 0.2) -> str:
        """Count down, reporting progress at each step; stops early when cancelled.

        Args:
            steps: how many steps to count.
            delay: seconds to wait between steps.
        """
        for done in range(steps):
            if ctx.wait_cancelled(delay):
                return f"cancelled after {done} of {steps} steps"
            ctx.progress(done + 1, steps, f"step {done + 1} of {steps}")
            ctx.info(f"countdown: {steps - done - 1} to go")
        return f"counted down {steps} steps"

    @service.tool
    def fail(message: str = "this tool always fails") -> str:
        """Always fail with the given message (a tool error, not a protocol error)."""
        raise ToolError(message)

    @service.prompt(complete={"language": LANGUAGES})
    def review_code(code: str, language: str = "python") -> str:
        """Ask for a careful review of a piece of code.

        Args:
            code: the code to review.
            language: the programming language of the code.
        """
        return f"Please review this {language} code for bugs, clarity and style:\n\n```{language}\n{code}\n```"

    @service.resource("demo://readme", name="readme", mime_type="text/markdown")
    def readme() -> str:
        """What this demo server offers."""
        return README

    @service.resource("demo://greeting/{name}", name="greeting", mime_type="text/plain", complete={"name": NAMES})
    def greeting(name: str) -> str:
        """A greeting for anyone."""
        return f"Hello, {name}!"

    return service
