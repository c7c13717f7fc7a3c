"""authserver.py: a toy OAuth 2.1 authorization server, for trying the login on one machine, never
for production: it approves every login at once, as the user ada, and keeps everything in memory
(run: python authserver.py 127.0.0.1:9000; it needs PyJWT, which mcpsync[auth] brings)."""
import base64
import hashlib
import json
import secrets
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

HOST, PORT = sys.argv[1].rsplit(":", 1)
ISSUER = f"http://{HOST}:{PORT}"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # a new signing key every run
JWKS = {"keys": [{**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key())), "kid": "toy", "alg": "RS256", "use": "sig"}]}
METADATA = {  # RFC 8414, at /.well-known/oauth-authorization-server
    "issuer": ISSUER,
    "authorization_endpoint": f"{ISSUER}/authorize",
    "token_endpoint": f"{ISSUER}/token",
    "registration_endpoint": f"{ISSUER}/register",
    "jwks_uri": f"{ISSUER}/jwks",
    "response_types_supported": ["code"],
    "grant_types_supported": ["authorization_code", "refresh_token"],
    "code_challenge_methods_supported": ["S256"],
    "token_endpoint_auth_methods_supported": ["none"],  # public clients: PKCE stands for the secret
    "authorization_response_iss_parameter_supported": True,  # RFC 9207
}
clients: dict[str, list[str]] = {}  # client_id -> its redirect URIs
codes: dict[str, dict] = {}  # authorization code -> what it was issued for
refresh_tokens: dict[str, dict] = {}  # refresh token -> what it may be traded for


def tokens(grant: dict) -> dict:
    """An RS256 JWT access token for the grant's resource (its audience) and scope, and a refresh token."""
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": "ada", "aud": grant["resource"], "client_id": grant["client_id"],
              "scope": grant["scope"], "iat": now, "exp": now + 300, "jti": secrets.token_urlsafe(8)}
    access = jwt.encode(claims, KEY, algorithm="RS256", headers={"kid": "toy", "typ": "at+jwt"})
    refresh = secrets.token_urlsafe(32)
    refresh_tokens[refresh] = grant
    print(f"authserver: a token for {grant['client_id']}, scope {grant['scope']!r}, audience {grant['resource']}", flush=True)
    return {"access_token": access, "token_type": "Bearer", "expires_in": 300, "refresh_token": refresh, "scope": grant["scope"]}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format, *args):
        pass  # request lines carry codes and tokens

    def answer(self, status, body=None, location=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path == "/.well-known/oauth-authorization-server":
            return self.answer(200, METADATA)
        if path == "/jwks":
            return self.answer(200, JWKS)
        if path != "/authorize":
            return self.answer(404, {"error": "not_found"})
        asked = dict(urllib.parse.parse_qsl(query))
        redirect_uri = asked.get("redirect_uri", "")
        if redirect_uri not in clients.get(asked.get("client_id", ""), []):
            return self.answer(400, {"error": "invalid_request"})  # never redirect to an unknown place
        if asked.get("response_type") != "code" or asked.get("code_challenge_method") != "S256" or "resource" not in asked:
            error = {"error": "invalid_request", "state": asked.get("state", ""), "iss": ISSUER}
            return self.answer(302, location=f"{redirect_uri}?{urllib.parse.urlencode(error)}")
        code = secrets.token_urlsafe(32)  # approved at once: a real server asks the user here
        codes[code] = {"client_id": asked["client_id"], "redirect_uri": redirect_uri, "challenge": asked["code_challenge"],
                       "scope": asked.get("scope", ""), "resource": asked["resource"], "expires": time.time() + 60}
        back = {"code": code, "state": asked.get("state", ""), "iss": ISSUER}
        self.answer(302, location=f"{redirect_uri}?{urllib.parse.urlencode(back)}")

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        if self.path == "/register":  # RFC 7591 dynamic client registration
            asked = json.loads(body)
            client_id = f"client-{len(clients) + 1}"
            clients[client_id] = list(asked.get("redirect_uris", []))
            print(f"authserver: registered {client_id} ({asked.get('client_name')})", flush=True)
            return self.answer(201, {**asked, "client_id": client_id, "token_endpoint_auth_method": "none"})
        if self.path != "/token":
            return self.answer(404, {"error": "not_found"})
        form = dict(urllib.parse.parse_qsl(body))
        if form.get("grant_type") == "authorization_code":
            grant = codes.pop(form.get("code", ""), None)  # a code is used once
            verifier = form.get("code_verifier", "").encode()
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
            if (grant is None or grant["expires"] < time.time() or grant["client_id"] != form.get("client_id")
                    or grant["redirect_uri"] != form.get("redirect_uri") or grant["challenge"] != challenge
                    or grant["resource"] != form.get("resource", grant["resource"])):
                return self.answer(400, {"error": "invalid_grant"})
            return self.answer(200, tokens(grant))
        if form.get("grant_type") == "refresh_token":
            grant = refresh_tokens.pop(form.get("refresh_token", ""), None)  # rotated: each is used once
            if grant is None or grant["client_id"] != form.get("client_id"):
                return self.answer(400, {"error": "invalid_grant"})
            return self.answer(200, tokens(grant))
        self.answer(400, {"error": "unsupported_grant_type"})


server = ThreadingHTTPServer((HOST, int(PORT)), Handler)
print(f"authserver: issuing tokens at {ISSUER}", flush=True)
server.serve_forever()
