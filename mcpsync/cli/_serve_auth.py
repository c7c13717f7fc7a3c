"""`mcpsync serve`'s authorization, both ways: the --auth-* options and the [auth] table made into
the `Auth` of its endpoint, and each upstream's `auth` table made into the gateway's credentials.

Strategy: the options are checked as the config file's table is (`config.url_problem`,
`config.scope_problem`), merged over the table key by key, and every mistake is a usage error
raised before a target is loaded or a port is bound. Nothing of `mcpsync.auth` is imported unless
authorization is asked for, and then only the verifier chosen (the JWT one imports PyJWT, an
optional extra). Its own module, beside cli.py: the serve command only calls `auth_options` and
`auth_for`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from ..auth import Auth, HttpCredentials, TokenVerifier
    from .config import AuthConfig, GatewayConfig, UpstreamAuth

F = TypeVar("F", bound=Callable[..., Any])


def _checked(kind: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """An --auth-* option's callback: each value checked as the [auth] table checks it, a URL or a
    scope (config.py says what is wrong, so both say it alike; imported only when such an option
    is given)."""

    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        values = value if isinstance(value, tuple) else (value,) if value is not None else ()
        if not values:  # click calls back for options not given too
            return value
        from .config import scope_problem, url_problem

        for item in values:
            if kind == "scope" and (problem := scope_problem(item)):
                raise click.BadParameter(problem, ctx, param)
            if kind == "url" and (problem := url_problem(item)):
                raise click.BadParameter(f"{item!r} {problem}", ctx, param)
        return value

    return check


_URL = _checked("url")
_AUTH_OPTIONS = {
    "resource": "--auth-resource",
    "issuer": "--auth-issuer",
    "jwks_url": "--auth-jwks-url",
    "introspection_url": "--auth-introspection-url",
    "token_file": "--auth-token-file",
    "authorization_servers": "--auth-server",
    "scopes": "--auth-scope",
}
"""Each [auth] key and the option that overrides it."""


def auth_options(command: F) -> F:
    """serve's --auth-* options: its HTTP endpoint as an OAuth 2.1 resource server."""
    options = [
        click.option(
            "--auth-resource",
            metavar="URL",
            callback=_URL,
            help="HTTP auth: this endpoint's canonical URL (https://mcp.example.com/mcp): the audience its tokens must name, "
            "and the resource of its protected resource metadata.",
        ),
        click.option(
            "--auth-issuer",
            metavar="ISS",
            callback=_URL,
            help="HTTP auth: the authorization server whose tokens are accepted (their iss, a URL); the default --auth-server.",
        ),
        click.option(
            "--auth-jwks-url",
            metavar="URL",
            callback=_URL,
            help="HTTP auth: check JWT access tokens with the keys published at URL (needs --auth-issuer and --auth-resource).",
        ),
        click.option(
            "--auth-introspection-url",
            metavar="URL",
            callback=_URL,
            help="HTTP auth: ask this RFC 7662 introspection endpoint about each token (needs --auth-resource), as the client "
            "named by the environment variables MCPSYNC_AUTH_CLIENT_ID and MCPSYNC_AUTH_CLIENT_SECRET, if set.",
        ),
        click.option(
            "--auth-token-file",
            type=click.Path(dir_okay=False),
            help="HTTP auth: accept the static tokens in FILE, one a line: TOKEN [sub=NAME] [client_id=ID] [SCOPE...] "
            "(# comments). For development and tests.",
        ),
        click.option(
            "--auth-server",
            "auth_servers",
            multiple=True,
            metavar="URL",
            callback=_URL,
            help="HTTP auth: an authorization server where clients get tokens, listed in the metadata (default: --auth-issuer). Repeatable.",
        ),
        click.option(
            "--auth-scope",
            "auth_scopes",
            multiple=True,
            metavar="SCOPE",
            callback=_checked("scope"),
            help="HTTP auth: a scope every token must have. Repeatable.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def auth_for(config: GatewayConfig | None, given: dict[str, Any], *, over_http: bool) -> Auth | None:
    """The `Auth` that the --auth-* options (`given`, by [auth] key) and the config's [auth] table
    describe, or None when neither says anything: then no verifier (nor PyJWT) is imported.

    Every mistake is a usage error raised here, before a target is loaded or a port is bound."""
    table = config.auth if config is not None else None
    options = [_AUTH_OPTIONS[key] for key, value in given.items() if value]
    if not options and table is None:
        return None
    if not over_http:
        if options:
            raise click.UsageError(
                f"{options[0]} applies to --http only: authorization protects an HTTP endpoint; "
                "a stdio server answers the one client that started it, and takes its own credentials from its environment"
            )
        assert config is not None
        logging.getLogger("mcpsync").info("the [auth] table of %s applies to --http only: stdio is served without it", config.path)
        return None
    from .config import AuthConfig

    chosen = (table or AuthConfig()).merged(AuthConfig(**given))
    _check_auth(chosen, given, config.path if table is not None and config is not None else None)
    return _build_auth(chosen)


def _check_auth(chosen: AuthConfig, given: dict[str, Any], path: str | None) -> None:
    """Exactly one way to check tokens, with what it needs; each key named as the user gave it
    (an option, or a key of the [auth] table in `path`)."""

    def said(key: str) -> str:
        return _AUTH_OPTIONS[key] if given[key] or path is None else f"{key} in the [auth] table of {path}"

    def missing(key: str) -> str:
        return _AUTH_OPTIONS[key] + (f" (or {key} in the [auth] table of {path})" if path is not None else "")

    sources = chosen.sources()
    if not sources:
        raise click.UsageError(
            "authorization needs one way to check tokens: --auth-jwks-url, --auth-introspection-url or --auth-token-file"
            + (f" (or jwks_url, introspection_url or token_file in the [auth] table of {path})" if path is not None else "")
        )
    if len(sources) > 1:
        raise click.UsageError(f"give one way to check tokens, not both {said(sources[0])} and {said(sources[1])}")
    source = sources[0]
    if source == "jwks_url" and not chosen.issuer:
        raise click.UsageError(f"{said(source)} needs {missing('issuer')}: the issuer (iss) its tokens must name")
    if source != "token_file" and not chosen.resource:
        raise click.UsageError(f"{said(source)} needs {missing('resource')}: this endpoint's URL, the audience its tokens must name")
    if source == "introspection_url":
        _introspection_client()  # the environment's mistakes too, before anything starts


def _introspection_client() -> tuple[str | None, str | None]:
    """The client id and secret introspection authenticates with, from the environment only: a
    secret on the command line would show in `ps`, and a config file gets copied around."""
    client_id = os.environ.get("MCPSYNC_AUTH_CLIENT_ID") or None
    client_secret = os.environ.get("MCPSYNC_AUTH_CLIENT_SECRET") or None
    if client_secret is not None and client_id is None:
        raise click.UsageError("MCPSYNC_AUTH_CLIENT_SECRET is set but MCPSYNC_AUTH_CLIENT_ID is not: set both, or neither")
    return client_id, client_secret


def _build_auth(chosen: AuthConfig) -> Auth:
    """The verifier `chosen` names, inside the `Auth` of the endpoint. A verifier that cannot be
    built (a token file that does not parse, PyJWT not installed) exits 1 with its own message."""
    from ..auth import Auth
    from ..errors import McpsyncError

    servers = chosen.authorization_servers or ([chosen.issuer] if chosen.issuer else [])
    try:
        return Auth(
            _verifier(chosen),
            resource=chosen.resource,
            authorization_servers=servers,
            required_scopes=chosen.scopes,
            resource_name=chosen.resource_name,
            scope_implies=chosen.scope_implies,
        )
    except OSError as exc:  # the token file
        raise click.ClickException(f"{exc.filename or chosen.token_file}: cannot read: {exc.strerror or exc}") from exc
    except (ImportError, McpsyncError, ValueError) as exc:  # the parser's message names PATH:LINE, never the token
        raise click.ClickException(str(exc)) from exc


def _verifier(chosen: AuthConfig) -> TokenVerifier:
    """JwtVerifier, IntrospectionVerifier or StaticTokens: each imported only when chosen (the JWT
    one imports PyJWT, the optional extra)."""
    if chosen.jwks_url:
        from ..auth.resource.jwt import JwtVerifier

        assert chosen.issuer and chosen.resource, "_check_auth requires them"
        return JwtVerifier(jwks_url=chosen.jwks_url, issuer=chosen.issuer, audience=chosen.resource)
    if chosen.introspection_url:
        from ..auth.resource.introspection import IntrospectionVerifier

        client_id, client_secret = _introspection_client()
        return IntrospectionVerifier(
            chosen.introspection_url, client_id=client_id, client_secret=client_secret, audience=chosen.resource, issuer=chosen.issuer
        )
    from ..auth.resource.static import StaticTokens

    assert chosen.token_file, "_check_auth requires one source"
    return StaticTokens.from_file(chosen.token_file)


def upstream_credentials(name: str, auth: UpstreamAuth) -> HttpCredentials:
    """The gateway's credentials for upstream `name`, from its `auth` table (config.py checked its
    shape); a secret the table names but the environment lacks, or an unreadable key file, is a
    usage error naming the upstream."""
    from ..errors import McpsyncError

    def secret(variable: str | None) -> str | None:
        if variable is None:
            return None
        value = os.environ.get(variable)
        if not value:
            raise click.UsageError(f"upstream {name!r}: the environment variable {variable} (its {auth.type} secret) is not set")
        return value

    try:
        if auth.type == "bearer":
            from ..auth.client.credentials import BearerToken

            token = secret(auth.token_env)
            assert token is not None, "config.py requires token_env"
            return BearerToken(token)
        if auth.type == "client_credentials":
            from ..auth.client.client_credentials import ClientCredentials

            assert auth.client_id is not None, "config.py requires client_id"
            private_key = None
            if auth.private_key_file is not None:
                with open(auth.private_key_file, encoding="utf-8") as key_file:
                    private_key = key_file.read()
            return ClientCredentials(
                auth.client_id,
                client_secret=secret(auth.client_secret_env),
                private_key=private_key,
                signing_algorithm=auth.signing_algorithm or "ES256",
                scopes=auth.scopes,
            )
        from ..auth.client.oauth import OAuth

        return OAuth(
            client_id=auth.client_id,
            client_secret=secret(auth.client_secret_env),
            client_metadata_url=auth.client_metadata_url,
            scopes=auth.scopes,
            interactive=auth.interactive,
        )
    except OSError as exc:
        raise click.ClickException(f"upstream {name!r}: {auth.private_key_file}: cannot read: {exc.strerror or exc}") from exc
    except (ImportError, McpsyncError, ValueError) as exc:
        raise click.ClickException(f"upstream {name!r}: {exc}") from exc
