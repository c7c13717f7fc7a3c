"""The client commands, `mcpsync tools`, `call` and `listen`: one session to a server (URL or
command), one request, its answer printed; exit statuses a script can act on.
"""

from __future__ import annotations

import click

from ._client_common import (
    _call_failure,
    _client_options,
    _ClientFailure,
    _endpoint,
    _interruptible,
    _open,
    _print_json,
    _print_result,
)


@click.command(short_help="List the tools of an MCP server (URL or COMMAND).")
@_client_options
@click.option("--json", "as_json", is_flag=True, help="Print the full tool definitions as JSON.")
@_interruptible
def tools(server: tuple[str, ...], mode: str, timeout: float, token_env: str | None, as_json: bool) -> None:
    """List the tools of the MCP server at URL (Streamable HTTP) or started by COMMAND.

    \b
    Examples:
      mcpsync tools -- mcpsync serve
      mcpsync tools http://127.0.0.1:8000/mcp
    """
    from ..errors import McpsyncError

    with _open(server, mode, timeout, token_env) as session:
        try:
            listed = session.list_tools()
        except McpsyncError as exc:
            raise _ClientFailure(str(exc)) from exc
    if as_json:
        _print_json(listed)
        return
    width = max((len(tool["name"]) for tool in listed), default=0)
    for tool in listed:
        summary = (tool.get("description") or "").strip().splitlines()
        click.echo(f"{tool['name']:<{width}}  {summary[0] if summary else ''}".rstrip())


@click.command(short_help="Call a tool of an MCP server (URL or COMMAND).")
@click.argument("tool")
@click.option("--args", "arguments", default="{}", show_default=True, help="Tool arguments as a JSON object.")
@_client_options
@click.option("--json", "as_json", is_flag=True, help="Print the whole CallToolResult as JSON.")
@click.option("--task", "as_task", is_flag=True, help="Run the call as a task the server keeps: show its id and status as it changes, then its result.")
@_interruptible
def call(tool: str, arguments: str, server: tuple[str, ...], mode: str, timeout: float, token_env: str | None, as_json: bool, as_task: bool) -> None:
    """Call TOOL on the MCP server at URL (Streamable HTTP) or started by COMMAND, and print its
    result.

    It answers no question of the tool's: a tool that asks the user (elicitation), the model
    (sampling) or for the client's roots does not succeed here, in either protocol era.

    With --task the call runs as a task, when the server and the tool offer tasks (otherwise it is
    answered at once, as without it). The task's id goes to stderr at once, then each change of its
    status or status message; its result is printed as without --task. Over HTTP, a poll that
    cannot reach the server is tried again, waiting longer each time, for as long as the server
    keeps the task. Ctrl-C cancels the task. `mcpsync tasks URL TASK_ID` finds it again later.

    \b
    Exit status:
      0    the tool succeeded
      1    the tool reported an error (isError), or it asked for what mcpsync call
           cannot give (elicitation, sampling, roots)
      2    a usage error: an unknown option, --args that are not a JSON object,
           a URL that cannot be used (an unknown scheme, credentials in it)
      3    the call itself failed: the server could not be started, reached or
           authorized, it answered a JSON-RPC error, or --timeout passed; with
           --task, also a task that failed with such an error or was cancelled
      130  interrupted (Ctrl-C); with --task, the task was cancelled first

    \b
    Examples:
      mcpsync call add --args '{"a": 2, "b": 3}' -- mcpsync serve
      mcpsync call add --args '{"a": 2, "b": 3}' http://127.0.0.1:8000/mcp
      mcpsync call report --task http://127.0.0.1:8000/mcp
    """
    import json

    from ..errors import McpsyncError

    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--args") from exc
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--args")

    def progress(done: float, total: float | None, message: str | None) -> None:
        click.echo(f"progress: {done}{f'/{total}' if total is not None else ''}{f' {message}' if message else ''}", err=True)

    with _open(server, mode, timeout, token_env) as session:
        try:
            if as_task:
                from .tasks import call_as_task

                result = call_as_task(session, tool, parsed, progress, over_http=_endpoint(server) is not None)
            else:
                result = session.call_tool(tool, parsed, progress=progress)
        except McpsyncError as exc:
            raise _call_failure(exc) from exc
    _print_result(result, as_json)


@click.command(short_help="Print the list changes of an MCP server (URL or COMMAND).")
@_client_options
@click.option("--count", type=click.IntRange(min=1), help="Stop after this many events.")
@click.option("--resource", "resources", multiple=True, metavar="URI", help="Also watch this resource (repeatable).")
@_interruptible
def listen(server: tuple[str, ...], mode: str, timeout: float, token_env: str | None, count: int | None, resources: tuple[str, ...]) -> None:
    """Print the list changes (and resource updates) of the MCP server at URL (Streamable HTTP)
    or started by COMMAND.

    One line per event, as it arrives, until the server ends, Ctrl-C, or --count events.

    \b
    Examples:
      mcpsync listen --resource file:///notes -- mcpsync serve app.py
      mcpsync listen http://127.0.0.1:8000/mcp
    """
    from ..client import ListChanged
    from ..errors import McpsyncError

    with _open(server, mode, timeout, token_env) as session:
        try:
            listener = session.listen(tools=True, prompts=True, resources=True, resource_uris=resources)
        except McpsyncError as exc:
            raise _ClientFailure(str(exc)) from exc
        click.echo(f"listening ({session.era.value if session.era else '?'} era)", err=True)
        seen = 0
        with listener:
            try:
                for event in listener:
                    if isinstance(event, ListChanged):
                        click.echo(f"{event.kind} list changed")
                    else:
                        click.echo(f"resource updated {event.uri}")
                    seen += 1
                    if count is not None and seen >= count:
                        break
            except KeyboardInterrupt:
                pass
        if listener.error is not None:  # the server went away: the end of what there was to hear
            click.echo(f"the server ended: {listener.error}", err=True)
