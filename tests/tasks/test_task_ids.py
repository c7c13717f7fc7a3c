"""A task's id is one a command line takes as an argument: never beginning with "-" (`mcpsync tasks
URL ID` read such an id as an unknown option and exited 2, one task in 64), and still random."""

from __future__ import annotations

from mcpsync.tasks.runner import new_task_id


def test_no_task_id_begins_with_a_dash_and_none_repeats() -> None:
    ids = [new_task_id() for _ in range(4096)]  # about 64 would begin with "-" if drawn as they come
    assert not [task_id for task_id in ids if task_id.startswith("-")]
    assert len(set(ids)) == len(ids) and {len(task_id) for task_id in ids} == {24}
