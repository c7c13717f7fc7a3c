"""own_verifier.py: a token verifier of your own, for the API keys your application issues (run: python own_verifier.py)."""
import hashlib
import time
import urllib.error
import urllib.request

import mcpsync
from mcpsync import Server, Service
from mcpsync.auth import Auth, InvalidToken, Principal, VerifierUnavailable


class ApiKeys:
    """API keys kept by their SHA-256 digest, as your application's database would keep them."""

    def __init__(self):
        self.rows = {}  # digest -> (user, scopes, expires)
        self.reachable = True  # the database, here a switch

    def issue(self, key, user, scopes, lifetime):
        self.rows[hashlib.sha256(key.encode()).hexdigest()] = (user, scopes, time.time() + lifetime)

    def verify(self, token):  # called on many threads at once: only reads here
        if not self.reachable:
            raise VerifierUnavailable("the key database is unreachable")  # 503: the token is not blamed
        row = self.rows.get(hashlib.sha256(token.encode()).hexdigest())
        if row is None:
            return None  # 401 invalid_token
        user, scopes, expires = row
        if expires < time.time():
            raise InvalidToken("the API key has expired")  # the client reads this: no secrets in it
        return Principal(subject=user, scopes=frozenset(scopes), expires_at=expires)


service = Service("hello")


@service.tool
def greet(ctx: mcpsync.Context) -> str:
    """Greet the caller."""
    return f"Hello, {ctx.principal.subject}!"


keys = ApiKeys()
keys.issue("key-ada-0123456789abcdef", "ada", ["hello"], lifetime=3600)
keys.issue("key-bob-0123456789abcdef", "bob", ["hello"], lifetime=-1)
server = Server("hello", services=[service], auth=Auth(keys, required_scopes=["hello"]))
url = server.start_http("127.0.0.1", 0).url


def refusal(key):
    """The status and the challenge (or Retry-After) a request with `key` is refused with."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, b"{}", {"Authorization": f"Bearer {key}"}))
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers["WWW-Authenticate"] or f"Retry-After: {refused.headers['Retry-After']}"


for key in ("key-ada-0123456789abcdef", "key-bob-0123456789abcdef", "key-eve-0123456789abcdef"):
    try:
        with mcpsync.connect(url, mode="modern", headers={"Authorization": f"Bearer {key}"}) as session:
            print(key[:7], "->", session.call_tool("greet", {})["content"][0]["text"])
    except mcpsync.McpError as refused:
        print(key[:7], "->", refused)
        print("  ", *refusal(key))

keys.reachable = False
try:
    mcpsync.connect(url, mode="modern", headers={"Authorization": "Bearer key-ada-0123456789abcdef"}).close()
except mcpsync.McpError as refused:
    print("database down ->", refused)
    print("  ", *refusal("key-ada-0123456789abcdef"))
server.close()
