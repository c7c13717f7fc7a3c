"""What the client commands (`clients`: tools, call, listen; `tasks`) share: their options, opening
one session from what a person typed, the failures and exit statuses a script can act on, and
printing a result. A module of its own so that the two families import it and not each other.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from ._url_text import has_credentials, lower_scheme, shown, unknown_scheme, url_scheme

if TYPE_CHECKING:
    from ..client import ClientSession


F = TypeVar("F", bound=Callable[..., Any])


# -- the client commands ---------------------------------------------------------------------------

EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_FAILURE = 3
EXIT_INTERRUPTED = 130
"""Ctrl-C: 128 + SIGINT, what a shell reports for a command the signal ended (not click's 1, which
`call` uses for a tool's error)."""


def _client_options(command: F) -> F:
    """The arguments and options every client command (tools, call, listen) takes."""
    command = click.argument("server", nargs=-1, required=True, metavar="URL | -- COMMAND...")(command)
    return _connection_options(command)


def _connection_options(command: F) -> F:
    """How a client command talks to its server: --timeout, --mode, --token-env."""
    command = click.option("--timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Deadline of each request, in seconds.")(command)
    command = click.option(
        "--mode",
        type=click.Choice(["auto", "legacy", "modern"]),
        default="auto",
        show_default=True,
        help="Protocol era: probe 2026-07-28 and fall back (auto), or force one.",
    )(command)
    command = click.option(
        "--token-env",
        metavar="VARIABLE",
        help="URL: send the bearer token in this environment variable (one you were given), instead of the tokens mcpsync login kept.",
    )(command)
    return command


class _ClientFailure(click.ClickException):
    exit_code = EXIT_FAILURE


class _UsageFailure(click.ClickException):
    """A usage error told in one line (click's own adds the usage and a hint about --help)."""

    exit_code = EXIT_USAGE


class _NeedsAnswer(click.ClickException):
    """The tool asked for something this command cannot give (elicitation, sampling, roots): the
    tool did not succeed, as in the handshake era, where the server answers such a call with an
    error result, so both eras exit alike."""

    exit_code = EXIT_TOOL_ERROR


def _interruptible(command: F) -> F:
    """`command`, ended by Ctrl-C with EXIT_INTERRUPTED and one word on stderr, rather than
    click's "Aborted!" and 1 (the session is closed on the way out, its child stopped)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)

    return cast(F, run)


def _endpoint(server: tuple[str, ...]) -> str | None:
    """The http(s) URL that SERVER is, or None when it is a command. A usage error for a URL this
    command cannot use: another scheme (a typo such as htp://, which would otherwise be started as
    a program), or credentials in it, which are never sent (a token goes in --token-env)."""
    if len(server) != 1 or url_scheme(server[0]) is None:
        return None
    url = server[0]
    if problem := unknown_scheme(url):
        raise _UsageFailure(problem)
    if has_credentials(url):
        raise _UsageFailure(
            f"{shown(url)}: credentials in the URL are not supported; pass a token in an environment variable with --token-env VARIABLE, "
            f"or log in: mcpsync login {shown(url)}"
        )
    return lower_scheme(url)  # HTTPS://... too


def _open(server: tuple[str, ...], mode: str, timeout: float, token_env: str | None) -> ClientSession:
    """A session with the server: a command, or a URL reached with the token in `token_env`, else
    with the tokens `mcpsync login` stored for it (never a browser here: a refused URL says to log
    in, or, when there is nothing to log in to, to pass a token with --token-env)."""
    from ..client import connect
    from ..errors import InvalidUrl, McpsyncError

    url = _endpoint(server)
    target: list[str] | str = list(server) if url is None else url  # a Streamable HTTP endpoint, or a command
    auth: Any = None
    if url is not None:
        from ._login import credentials_for

        try:
            auth = credentials_for(token_env, timeout=timeout)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--token-env") from exc
    elif token_env is not None:
        raise click.BadParameter("is for a URL: a command takes its credentials from its environment", param_hint="--token-env")
    try:
        return connect(target, mode=mode, timeout=timeout, auth=auth)
    except InvalidUrl as exc:
        raise _UsageFailure(str(exc)) from exc
    except McpsyncError as exc:
        raise _ClientFailure(f"cannot talk to {' '.join(server)}: {exc}") from exc


def _needs_an_answer(exc: Exception) -> bool:
    """Whether a failed call is the tool asking for what no client command gives: a 2026-07-28
    server's -32021 (the client capability is not declared), or an input_required asking for it
    anyway (MissingCallback)."""
    from ..errors import MissingCallback
    from ..protocol.jsonrpc import ErrorCode, McpError

    return isinstance(exc, MissingCallback) or (isinstance(exc, McpError) and exc.code == ErrorCode.MISSING_CLIENT_CAPABILITY)


def _print_json(value: object) -> None:
    import json

    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def _call_failure(exc: Exception) -> click.ClickException:
    """How a failed call ends the command: a question it cannot answer (1), anything else (3)."""
    if _needs_an_answer(exc):
        return _NeedsAnswer(f"{exc} (mcpsync call answers no elicitation, sampling or roots request)")
    return _ClientFailure(str(exc))


def _print_result(result: dict[str, Any], as_json: bool) -> None:
    """Print a CallToolResult (its text blocks one a line, other blocks as JSON, or all of it as
    JSON), then leave with EXIT_TOOL_ERROR if it is a tool's error."""
    import json

    if as_json:
        _print_json(result)
    else:
        for block in result.get("content") or []:
            click.echo(block["text"] if block.get("type") == "text" else json.dumps(block, ensure_ascii=False))
    if result.get("isError"):
        sys.exit(EXIT_TOOL_ERROR)
