"""`mcpsync login` and `logout`: an OAuth login to a protected server, its tokens kept for the
client commands, and forgetting them (`_login` does the work).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ._client_common import _ClientFailure, _UsageFailure
from ._url_text import has_credentials, shown

if TYPE_CHECKING:
    pass


@click.command(short_help="Log in to a protected MCP server (URL) and keep its tokens.")
@click.argument("url")
@click.option("--client-id", help="A client registered in advance with the authorization server (else one is registered).")
@click.option(
    "--client-metadata-url",
    metavar="URL",
    help="This client's metadata document (an https URL), used as its client ID where the authorization server supports that.",
)
@click.option("--scope", "scopes", multiple=True, metavar="SCOPE", help="A scope to ask for (default: what the server says it needs). Repeatable.")
@click.option("--no-browser", is_flag=True, help="Print the login URL instead of opening a browser.")
@click.option("--timeout", type=click.FloatRange(min=1), default=300.0, show_default=True, help="Seconds to wait for the login in the browser.")
def login(url: str, client_id: str | None, client_metadata_url: str | None, scopes: tuple[str, ...], no_browser: bool, timeout: float) -> None:
    """Log in to the MCP server at URL: discover its authorization server, register this client
    if need be, open the browser for you to log in, and keep the tokens (in
    ~/.config/mcpsync/tokens, one file per server, readable by you alone). `mcpsync tools`, `call`
    and `listen` then use them, refreshing them as they expire.

    A pre-registered client's secret is read from the environment variable MCPSYNC_CLIENT_SECRET.

    \b
    Examples:
      mcpsync login https://mcp.example.com/mcp
      mcpsync login https://mcp.example.com/mcp --client-id my-cli --scope files:read
    """
    if has_credentials(url):
        raise _UsageFailure(
            f"{shown(url)}: credentials in the URL are not supported; log in without them: mcpsync login {shown(url)} "
            "(a token you were given goes to mcpsync tools, call and listen with --token-env VARIABLE)"
        )
    from ._login import log_in

    try:
        where = log_in(url, client_id=client_id, client_metadata_url=client_metadata_url, scopes=scopes, print_url=no_browser, timeout=timeout)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    except Exception as exc:
        from ..errors import McpsyncError

        if not isinstance(exc, McpsyncError):
            raise
        raise _ClientFailure(f"cannot log in to {url}: {exc}") from exc
    click.echo(f"logged in to {url} (tokens kept in {where})", err=True)


@click.command(short_help="Forget the tokens kept for an MCP server (URL).")
@click.argument("url")
def logout(url: str) -> None:
    """Forget the tokens and client registration `mcpsync login` kept for the server at URL."""
    from ..errors import McpsyncError
    from ._login import log_out

    try:
        forgot = log_out(url)
    except McpsyncError as exc:
        raise _ClientFailure(str(exc)) from exc
    click.echo(f"logged out of {url}" if forgot else f"no tokens were kept for {url}", err=True)
