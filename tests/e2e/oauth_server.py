"""An OAuth-protected MCP server for the sign-in tests, built with the official MCP Python SDK: its
authorization-server routes (metadata, dynamic registration, authorize, token, revoke) over an
in-memory provider whose authorization endpoint approves at once, and the SDK's bearer check on
/mcp. Tools: `whoami` (the person the token belongs to: each sign-in is a new person, `person-N`,
and its refreshed tokens stay that person's), `echo`.

Run: python3 oauth_server.py PORT_FILE [--lifetime SECS] [--honour SECS] [--mode MODE] [--log FILE]
`--honour` makes access tokens stop working after SECS whatever their announced lifetime (a 401
the client must answer with a refresh).
It binds 127.0.0.1 on a free port and writes the port to PORT_FILE. `--log` gets one line per
token-endpoint exchange (grant type), per revocation, per 403 step-up, per `publish` run and per
`revoke-all`, so tests can count refreshes and runs.

Modes (hostile authorization servers):
  normal         approves at once
  other-issuer   the authorization-server metadata names another issuer
  missing-fields the token endpoint's answer has no access_token
  huge-token     the token endpoint answers 8 MiB
  far-callback   authorize redirects to a non-loopback callback, never to the bridge's
  http-endpoint  the metadata names a plain-http token endpoint off loopback
  open           no authorization at all (the same tools, for measuring what sign-in costs)
  static-bearer  no OAuth routes: /mcp answers 401 unless `Authorization: Bearer <--token>`
                 (for headers a client config supplies, e.g. Claude Code's headersHelper); the
                 401's body echoes the Authorization it got, as a careless server would
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from pathlib import Path

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse, Response


class InstantProvider:
    """Approves every authorization at once; tokens live `lifetime` seconds."""

    def __init__(self, lifetime: int, mode: str, log: Path | None, honour: int | None = None):
        self.honour = honour
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.lifetime, self.mode, self.log = lifetime, mode, log
        # Who each code and token belongs to: every authorization is a new person.
        self.person: dict[str, str] = {}
        self.people = 0

    def note(self, line: str) -> None:
        if self.log:
            with self.log.open("a") as f:
                f.write(line + "\n")

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        self.note(f"authorize scopes={' '.join(params.scopes or [])}")
        granted = [s for s in params.scopes or [] if s != NEVER_GRANTED]
        self.codes[code] = AuthorizationCode(
            code=code, scopes=granted, expires_at=time.time() + 300,
            client_id=client.client_id, code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource)
        self.people += 1
        self.person[code] = f"person-{self.people}"
        self.note(f"authorize resource={params.resource} redirect_uri={params.redirect_uri}")
        target = "https://callback.example.invalid/callback" if self.mode == "far-callback" \
            else str(params.redirect_uri)
        return f"{target}?code={code}&state={params.state}"

    async def load_authorization_code(self, client, authorization_code: str):
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, person: str = "") -> OAuthToken:
        access, refresh = "at-" + secrets.token_urlsafe(24), "rt-" + secrets.token_urlsafe(24)
        self.person[access] = self.person[refresh] = person
        alive = self.honour if self.honour is not None else self.lifetime
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + alive, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes,
                                             resource=resource)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=self.lifetime,
                          refresh_token=refresh, scope=" ".join(scopes) or None)

    async def exchange_authorization_code(self, client, authorization_code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.note(f"token authorization_code resource={authorization_code.resource}")
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource,
                           self.person.get(authorization_code.code, ""))

    async def load_refresh_token(self, client, refresh_token: str):
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client, refresh_token: RefreshToken, scopes: list[str]) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.note("token refresh_token")
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource,
                           self.person.get(refresh_token.token, ""))

    async def load_access_token(self, token: str) -> AccessToken | None:
        t = self.access.get(token)
        if t is None or (t.expires_at is not None and t.expires_at < time.time()):
            return None
        return t

    async def revoke_token(self, token) -> None:
        self.note(f"revoke {type(token).__name__}")
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("port_file")
    ap.add_argument("--lifetime", type=int, default=3600)
    ap.add_argument("--mode", default="normal")
    ap.add_argument("--log")
    ap.add_argument("--honour", type=int)
    ap.add_argument("--token", help="static-bearer: the one bearer token accepted; gated: the X-Gate value")
    args = ap.parse_args()

    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    provider = InstantProvider(args.lifetime, args.mode, Path(args.log) if args.log else None, args.honour)
    auth = AuthSettings(
        issuer_url=base, resource_server_url=f"{base}/mcp", validate_token_resource=False,
        client_registration_options=ClientRegistrationOptions(enabled=True),
        revocation_options=RevocationOptions(enabled=True))
    if args.mode in ("open", "static-bearer"):
        server = MCPServer("oauth-test")
    else:
        server = MCPServer("oauth-test", auth_server_provider=provider, auth=auth)

    @server.tool()
    def echo(text: str) -> str:
        """Echoes the text."""
        return text

    @server.tool()
    def publish(text: str) -> str:
        """Publishes the text (needs scope mcp:write)."""
        provider.note("tool publish")
        return f"published {text}"

    @server.tool()
    def admin() -> str:
        """Administers (needs scope mcp:admin, never granted)."""
        provider.note("tool admin")
        return "administered"

    @server.tool()
    def whoami() -> str:
        """The person the token belongs to."""
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
        return f"signed-in as {provider.person.get(token.token, '?') if token else 'nobody'}"

    app = server.streamable_http_app()
    if args.mode == "static-bearer":
        app = static_bearer(app, args.token or "", Path(args.log) if args.log else None)
    elif args.mode == "gated":
        app = gated(app, args.token or "", base, provider)
    elif args.mode not in ("normal", "open"):
        app = hostile(app, args.mode, base)
    if args.mode not in ("open", "static-bearer"):
        app = guarded(app, provider, base)
    Path(args.port_file).write_text(str(port))
    sys.stdout.flush()
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


def static_bearer(app, token: str, log: Path | None):
    """Wraps the app so every HTTP request needs `Authorization: Bearer <token>` (a 401 without
    any OAuth challenge otherwise, its body echoing what was sent); `log` gets `ok` or `refused`
    per request, never the token."""
    want = f"Bearer {token}".encode()

    async def wrapped(scope, receive, send):
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            ok = bool(token) and secrets.compare_digest(got, want)
            if log:
                with log.open("a") as f:
                    f.write(("ok" if ok else "refused") + "\n")
            if not ok:
                return await Response(b"unauthorized: " + got[:200], status_code=401)(scope, receive, send)
        return await app(scope, receive, send)

    return wrapped


# Where the gated mode serves its protected-resource metadata: named only by its challenge.
GATED_PRM = "/meta/prm"
# The scope its challenge asks for (and nothing else names).
GATED_SCOPE = b"mcp:gated"


def gated(app, gate: str, base: str, provider: InstantProvider):
    """Wraps the app as a server behind a gateway: `/mcp` answers only requests carrying
    `X-Gate: <gate>` (a 403 with no challenge otherwise), the protected-resource metadata is
    not at the well-known paths but at GATED_PRM, which the 401's challenge names with the
    scope GATED_SCOPE. So a client learns where and for what to sign in only if its first
    request carries the gateway's header. `provider`
    notes `gate ok` or `gate refused` per `/mcp` request, never the value."""
    want = gate.encode()
    well_known = "/.well-known/oauth-protected-resource"
    real_prm = well_known + "/mcp"

    async def wrapped(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        path = scope.get("path", "")
        if path.startswith(well_known):
            return await Response(b"not here", status_code=404)(scope, receive, send)
        if path == GATED_PRM:
            return await app(dict(scope, path=real_prm, raw_path=real_prm.encode()), receive, send)
        if path.startswith("/mcp"):
            got = dict(scope.get("headers") or []).get(b"x-gate", b"")
            ok = bool(gate) and secrets.compare_digest(got, want)
            provider.note("gate ok" if ok else "gate refused")
            if not ok:
                return await Response(b"gateway: no entry", status_code=403)(scope, receive, send)

            async def send_renamed(message):
                if message["type"] == "http.response.start":
                    headers = [(k, v.replace(real_prm.encode(), GATED_PRM.encode()) + b', scope="' + GATED_SCOPE + b'"')
                               if k.lower() == b"www-authenticate" else (k, v)
                               for k, v in message.get("headers", [])]
                    message = dict(message, headers=headers)
                await send(message)

            return await app(scope, receive, send_renamed)
        return await app(scope, receive, send)

    return wrapped


# The scope each guarded tool needs; `mcp:admin` is never granted.
NEEDS = {"publish": "mcp:write", "admin": "mcp:admin"}
NEVER_GRANTED = "mcp:admin"
MAX_BODY = 1 << 20


def guarded(app, provider: InstantProvider, base: str):
    """Wraps the app: `POST /test/revoke-all`, and the 403 step-up for a tool of `NEEDS` called
    without its scope (the call never reaches the server)."""

    async def wrapped(scope, receive, send):
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == "/test/revoke-all" and scope.get("method") == "POST":
            provider.access.clear()
            provider.refresh.clear()
            provider.note("revoke-all")
            return await JSONResponse({"revoked": True})(scope, receive, send)
        if path != "/mcp" or scope.get("method") != "POST":
            return await app(scope, receive, send)
        chunks, size = [], 0
        while True:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            if size > MAX_BODY or not msg.get("more_body"):
                break
        body = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        try:
            message = json.loads(body)
        except ValueError:
            message = None
        tool = isinstance(message, dict) and message.get("method") == "tools/call" \
            and (message.get("params") or {}).get("name")
        needed = NEEDS.get(tool) if isinstance(tool, str) else None
        if needed:
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            token = provider.access.get(auth.removeprefix("Bearer ").strip())
            if token is not None and needed not in token.scopes:
                provider.note(f"step-up 403 {tool}")
                challenge = (f'Bearer error="insufficient_scope", scope="{needed}", '
                             f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"')
                return await JSONResponse({"error": "insufficient_scope"}, status_code=403,
                                          headers={"WWW-Authenticate": challenge})(scope, replay, send)
        return await app(scope, replay, send)

    return wrapped


def hostile(app, mode: str, base: str):
    """Wraps the app so one endpoint misbehaves as `mode` says."""

    async def wrapped(scope, receive, send):
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if mode == "other-issuer" and path.startswith("/.well-known/oauth-authorization-server"):
            body = {"issuer": "https://evil.example", "authorization_endpoint": base + "/authorize",
                    "token_endpoint": base + "/token", "registration_endpoint": base + "/register",
                    "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"]}
            return await JSONResponse(body)(scope, receive, send)
        if mode == "http-endpoint" and path.startswith("/.well-known/oauth-authorization-server"):
            body = {"issuer": base, "authorization_endpoint": base + "/authorize",
                    "token_endpoint": "http://as.example.invalid/token", "registration_endpoint": base + "/register",
                    "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"]}
            return await JSONResponse(body)(scope, receive, send)
        if mode == "missing-fields" and path == "/token":
            return await JSONResponse({"token_type": "Bearer", "expires_in": 60})(scope, receive, send)
        if mode == "huge-token" and path == "/token":
            return await Response(b"{" + b" " * (8 << 20) + b"}", media_type="application/json")(
                scope, receive, send)
        return await app(scope, receive, send)

    _ = Request, json
    return wrapped


if __name__ == "__main__":
    main()
