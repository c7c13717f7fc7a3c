"""The user's browser for `mcpsync login` against oidc-provider: Python's `webbrowser` runs the
BROWSER variable's command with the authorization URL, and this opens it with a cookie jar (the
provider's login and consent interaction is tied to the browser by cookies) and follows every
redirect, the last one to the login's loopback listener, as a browser would once the user approved.
Exit 0 when the listener answered (webbrowser then counts the browser as opened)."""

import http.cookiejar
import sys
import urllib.request

opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
with opener.open(sys.argv[1], timeout=20) as response:
    response.read()
