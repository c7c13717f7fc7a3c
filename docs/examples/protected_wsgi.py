"""protected_wsgi.py: app.py's server behind the tokens of tokens.txt, for gunicorn (run: gunicorn ... protected_wsgi:app)."""
from pathlib import Path

from app import server
from mcpsync.auth import Auth, StaticTokens

auth = Auth(StaticTokens.from_file(Path(__file__).with_name("tokens.txt")), required_scopes=["notes:read"])
app = server.wsgi_app(auth=auth, max_streams=24)  # each worker process checks tokens itself
