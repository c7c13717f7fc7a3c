"""headless_client.py: a login with no browser and no listener: the application is handed the
authorization URL and hands back where the user was redirected (run: python headless_client.py,
with authserver.py and the notes server of login.console running)."""
import urllib.error
import urllib.parse
import urllib.request

import mcpsync
from mcpsync.auth import MemoryTokenStore, OAuth


class KeepRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None  # do not follow: the redirect is what we want


redirected = []


def send_user_to(url):
    """Stands for the user: here it opens the URL itself, which the toy server approves at once.
    A real application shows the URL (a chat message, a page) and waits for the user's answer."""
    asked = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    print("the authorization request asks for:", {name: asked[name][0] for name in ("scope", "resource", "code_challenge_method")})
    try:
        urllib.request.build_opener(KeepRedirects).open(url)
    except urllib.error.HTTPError as answer:  # the 302 back to the application
        redirected.append(answer.headers["Location"])


oauth = OAuth(
    redirect_uri="https://app.example.com/oauth/callback",  # the application's own page, not a listener
    redirect_handler=send_user_to,
    callback=lambda: redirected.pop(),  # the URL the user came back to, with code, state and iss
    token_store=MemoryTokenStore(),  # forgotten at exit: the next run logs in again
)
with mcpsync.connect("http://127.0.0.1:8000/mcp", auth=oauth) as session:
    print(session.call_tool("whoami", {})["content"][0]["text"])
