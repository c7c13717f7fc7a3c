"""Issue 28's trace across replicas: `mcpsync serve --otel --processes 2` behind nginx, where a
handshake-era tool's question is answered by a POST that the balancer sends to the other instance.
The question's span still ends in the process that asked, as a child of the call's span, in the
client's trace: the answer crossed Redis to reach it, and the trace did not break there.

The deployment is the replica tests' (integration/fixtures/instances.py: one redis-server, two
instances of integration/fixtures/replicas_app.py, each a gunicorn master of two workers, nginx
round-robin in front, so consecutive requests alternate between the instances), with `--otel`:
every worker exports on its own to the OTLP receiver started here (fixtures/otlp_receiver.py,
which decodes what arrives with `opentelemetry-proto`), batched every OTEL_BSP_SCHEDULE_DELAY ms.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.instances import deployed
from fixtures.otlp_receiver import Receiver
from fixtures.replica_http import Http, Stream
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span

pytestmark = pytest.mark.timeout(120)

APP = Path(__file__).parent / "fixtures" / "replicas_app.py"
SECRET = "the one requestState secret of every replica in this test"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


def _spans_until(receiver: Receiver, wanted: set[str]) -> dict[str, tuple[Span, dict[str, str]]]:
    """The exported spans by name (with their resource's attributes), once each wanted one came."""
    found: dict[str, tuple[Span, dict[str, str]]] = {}
    while not wanted <= found.keys():
        request = receiver.wait_for("/v1/traces")  # each wait bounded by the receiver's LONG
        resource_spans: ResourceSpans
        for resource_spans in request.resource_spans:
            resource = {attribute.key: attribute.value.string_value for attribute in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    found[span.name] = (span, resource)
    return found


def test_a_question_answered_through_the_other_instance_stays_in_the_trace_of_the_call(receiver: Receiver, tmp_path: Path) -> None:
    env = {
        "MCPSYNC_REQUEST_STATE_SECRET": SECRET, "REPLICAS_STATE": str(tmp_path / "unlocked"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "replicas", "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    with deployed(APP, env, ["--otel"]) as (_redis, instances, balancer):
        lb = Http(balancer.port)
        session = lb.initialize({"elicitation": {}})  # initialize, then notifications/initialized: one on each instance
        meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}, "_meta": meta}}
        stream = Stream(lb.post(call, session=session))
        _, question = stream.message()
        assert question["method"] == "elicitation/create", question
        carried = question["params"]["_meta"]["traceparent"]  # the server's span of the question, for the client to continue
        assert carried.split("-")[1] == TRACE_ID
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
        answered = lb.post(answer, session=session)
        answered.read()
        assert answered.status == 202
        assert answered.getheader("X-Upstream") != stream.upstream  # the answer went to the other instance
        _, result = stream.message()
        told = json.loads(result["result"]["content"][0]["text"])
        assert told["name"] == "Ada"
        asker = [instance for instance in instances if told["pid"] in instance.pids]
        assert [instance.address for instance in asker] == [stream.upstream]

        spans = _spans_until(receiver, {"tools/call ask_name", "elicitation/create"})
    (served, served_by), (asked, asked_by) = spans["tools/call ask_name"], spans["elicitation/create"]
    assert served.kind == Span.SPAN_KIND_SERVER and asked.kind == Span.SPAN_KIND_CLIENT
    assert (served.trace_id.hex(), served.parent_span_id.hex()) == (TRACE_ID, PARENT_ID)
    assert (asked.trace_id.hex(), asked.parent_span_id.hex()) == (TRACE_ID, served.span_id.hex())
    assert carried.split("-")[2] == asked.span_id.hex()  # what went on the wire is this span
    assert asked.status.code != asked.status.STATUS_CODE_ERROR and asked.end_time_unix_nano <= served.end_time_unix_nano
    assert asked_by == served_by  # one process asked, and its span ended there when the answer came
    assert asked_by["service.name"] == "replicas" and asked_by["service.instance.id"]


def _instance_ids(receiver: Receiver) -> set[str]:
    ids = set()
    while not receiver.received.empty():
        _, request = receiver.received.get_nowait()
        for resource in getattr(request, "resource_spans", None) or getattr(request, "resource_metrics", []):
            ids.update(attribute.value.string_value for attribute in resource.resource.attributes if attribute.key == "service.instance.id")
    return ids


def test_each_worker_exports_as_an_instance_of_its_own(receiver: Receiver, tmp_path: Path) -> None:
    """Four workers export the same service: each says which it is (service.instance.id), so their
    metrics are four series, not one that goes back and forth."""
    env = {
        "MCPSYNC_REQUEST_STATE_SECRET": SECRET, "REPLICAS_STATE": str(tmp_path / "unlocked"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "replicas", "OTEL_METRIC_EXPORT_INTERVAL": "100",
    }
    with deployed(APP, env, ["--otel"]) as (_redis, instances, _balancer):
        pids: dict[str, Any] = {}
        for instance in instances:
            for _ in range(len(instance.pids) * 20):  # fresh connections until each worker answered
                pids[Http(instance.port).call("pid", modern=True)] = instance
                if len(pids) == 4:
                    break
        assert len(pids) == 4, pids
        ids: set[str] = set()
        while len(ids) < 4:
            receiver.wait_for("/v1/metrics")  # each wait bounded: a worker that never exports fails here
            ids |= _instance_ids(receiver)
        assert len(ids) == 4, ids
