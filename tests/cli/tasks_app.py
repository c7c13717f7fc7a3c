"""The task tools of tests/client/task_tools.py, for `mcpsync serve tests/cli/tasks_app.py`."""

from tests.client.task_tools import make_server

server = make_server()
