"""Long jobs that outlive a request: MCP tasks, in both protocol forms, from plain blocking functions.

A tool marked `@service.tool(task="optional" | "required")` runs as a task when the client can take
one: the call is answered at once with the task's id, the function runs on the task runner's own
pool, and the client polls `tasks/get` (or waits on `tasks/result` in 2025-11-25), answers the
task's questions, and fetches the result. `record` holds the two wire forms, `store` where records
are kept, `runner` the threads, questions, leases and shutdown.
"""

from .limits import TaskLimits
from .record import TaskRecord
from .runner import TaskRunner
from .store import MemoryTaskStore, TaskStore

__all__ = ["MemoryTaskStore", "TaskLimits", "TaskRecord", "TaskRunner", "TaskStore"]
