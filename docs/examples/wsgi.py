"""wsgi.py: app.py's server as a WSGI application (run: gunicorn ... wsgi:app)."""
from app import server

app = server.wsgi_app(max_streams=24)  # streams below gunicorn's --threads: each holds a thread
