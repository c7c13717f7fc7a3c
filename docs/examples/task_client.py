"""task_client.py: call a tool as a task, follow it, answer its question, cancel another, in both eras."""
import mcpsync
from mcpsync import Context, Server, Service
from mcpsync.client import TaskCancelled

service = Service("backups")
CACHES = {"type": "object", "properties": {"caches": {"type": "boolean"}}, "required": ["caches"]}


@service.tool(task="optional")
def backup(ctx: Context, volume: str) -> str:
    """Back up a volume, asking first whether its caches go too."""
    answer = ctx.elicit(f"Back up the caches of {volume} too?", CACHES)
    ctx.progress(1, 2, "copying")
    with_caches = answer.get("action") == "accept" and answer["content"]["caches"]
    return f"backed up {volume}" + (" with its caches" if with_caches else "")


@service.tool(task="optional")
def rebuild_index(ctx: Context) -> str:
    """Rebuild the search index: a long job, until cancelled."""
    ctx.wait_cancelled(600)
    return "stopped" if ctx.cancelled else "rebuilt"


def elicitation(params):  # the task's question, in either era
    print("  asked:", params["message"])
    return {"action": "accept", "content": {"caches": True}}


server = Server("backups", services=[service])
for mode in ("modern", "legacy"):  # 2026-07-28, then 2025-11-25
    with mcpsync.connect(server, mode=mode, elicitation=elicitation) as session:
        print(session.era.value)
        task = session.call_tool("backup", {"volume": "/srv"}, task=True)
        print("  task made:", task.status)
        for status in task.statuses(timeout=30):  # polls; answers the question on the way
            if status.status != "working":  # the steps between depend on timing
                print("  status:", status.status)
        print(" ", task.result()["content"][0]["text"])

        long_job = session.call_tool("rebuild_index", task=True)
        again = session.task(long_job.task_id)  # a handle from a kept id, as after a reconnect
        print("  cancelled:", again.cancel().status)
        try:
            long_job.result(timeout=30)
        except TaskCancelled as exc:
            print("  result() raised", type(exc).__name__)
server.close()
