"""The conformance fixture: every tool, prompt and resource the official MCP conformance suite's server
scenarios call (npm @modelcontextprotocol/conformance 0.2.0-alpha.12), written with mcpsync's own API.

Serve it over Streamable HTTP and point the suite at it (see integration/conformance/README.md):

    python -m mcpsync serve --http 127.0.0.1:8000 integration/conformance/fixture.py
    scripts/conformance http://127.0.0.1:8000/mcp --ignore integration/conformance/known-failures.txt

or over stdio (``python -m mcpsync serve integration/conformance/fixture.py``), bridged to HTTP by
supergateway. The names are fixed by the suite; what each scenario checks is noted on each entry.

The asking tools (``test_sampling``, ``test_elicitation*``, ``test_input_required_result_*`` and the
prompt ``test_input_required_result_prompt``) are written once with ``ctx.elicit``/``ctx.sample``/
``ctx.roots``/``ctx.ask``: on a 2025-11-25 session they send the client requests mid-call; in 2026-07-28
the same code answers ``input_required`` and finishes on the client's retry. The ``requestState`` is
sealed under a fixed secret (below), because the supergateway leg starts a fresh stdio child for every
2026-07-28 request, so the retry is opened by another process than the one that sealed it.

The task tools (``greet`` to ``test_tool_with_task``, last) serve the ``tasks-*`` scenarios of the
io.modelcontextprotocol/tasks extension (``scripts/conformance URL --tasks``), over mcpsync's own HTTP
transport only: a task lives in the process that made it.
"""

from __future__ import annotations

import io
import json
import struct
import wave
import zlib
from typing import Annotated, Any

from mcpsync import Audio, Context, ErrorCode, Image, McpError, Question, Server, Service, Tool, ToolError

service = Service("conformance", instructions="The MCP conformance suite's fixture; every entry is a test probe.")


# -- media, built here rather than pasted in as base64 --------------------------------------------

def _png(width: int = 2, height: int = 2, rgb: tuple[int, int, int] = (220, 40, 40)) -> bytes:
    """A tiny solid-colour PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))  # filter byte 0 per row
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _wav(samples: int = 80, rate: int = 8000) -> bytes:
    """A short mono 16-bit WAV of silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\x00\x00" * samples)
    return buffer.getvalue()


PNG = _png()
WAV = _wav()


# -- tools: content types (tools-call-*) -----------------------------------------------------------
# test_simple_text stays the first tool: http-header-validation calls the first listed tool with {}.

@service.tool
def test_simple_text() -> str:
    """Returns one text block (tools-call-simple-text)."""
    return "This is a simple text response for testing."


@service.tool
def test_image_content() -> Image:
    """Returns one PNG image block (tools-call-image)."""
    return Image(PNG, mime_type="image/png")


@service.tool
def test_audio_content() -> Audio:
    """Returns one WAV audio block (tools-call-audio)."""
    return Audio(WAV, mime_type="audio/wav")


@service.tool
def test_embedded_resource():  # no return annotation: a dict one would advertise an outputSchema
    """Returns one embedded text resource (tools-call-embedded-resource)."""
    return {
        "type": "resource",
        "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."},
    }


@service.tool
def test_multiple_content_types():
    """Returns text, an image and an embedded resource together (tools-call-mixed-content)."""
    return [
        "Multiple content types test:",
        Image(PNG, mime_type="image/png"),
        {
            "type": "resource",
            "resource": {
                "uri": "test://mixed-content-resource",
                "mimeType": "application/json",
                "text": json.dumps({"test": "data", "value": 123}),
            },
        },
    ]


@service.tool
def test_error_handling() -> str:
    """Always fails with isError: true and a message (tools-call-error)."""
    raise ToolError("This tool intentionally returns an error for testing")


# -- tools: notifications during a call -----------------------------------------------------------

@service.tool
def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100 when the call carries a progressToken (tools-call-with-progress)."""
    for step in (0, 50, 100):
        if step:
            ctx.wait_cancelled(0.05)
        ctx.progress(step, 100, f"Completed step {step} of 100")
    return "progress reported: 0, 50, 100 of 100"


def _log_three_times(ctx: Context) -> str:
    for number, text in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if number:
            ctx.wait_cancelled(0.05)
        ctx.info(text)
    return "Tool with logging executed successfully"


service.add_tool(
    Tool(
        _log_three_times,
        name="test_tool_with_logging",
        description="Sends three info log messages while it runs (tools-call-with-logging, after logging/setLevel).",
    )
)
service.add_tool(
    Tool(
        _log_three_times,
        name="test_logging_tool",
        description="Logs like test_tool_with_logging; in 2026-07-28 nothing may be sent without a logLevel "
        "in the envelope (server-stateless: sep-2575-server-no-log-without-loglevel).",
    )
)


@service.tool
def test_reconnection(ctx: Context) -> str:
    """Logs, closes its stream, pauses and logs again (server-sse-polling, SEP-1699): the client
    reconnects with the stream's last event id and gets the second log and the result."""
    ctx.info("Before disconnect")
    ctx.close_stream()
    ctx.wait_cancelled(0.2)
    ctx.info("After reconnect")
    return "Reconnection test completed"


@service.tool
def test_streaming_elicitation() -> str:
    """Answers on the request's own stream and sends no request of its own (server-stateless:
    sep-2575-http-server-no-independent-requests-on-stream)."""
    return "No input was needed; nothing but this result was sent on the stream."


# -- tools: capabilities, schemas, headers --------------------------------------------------------

@service.tool(requires={"sampling": {}})
def test_missing_capability() -> str:
    """Needs the client's sampling capability: without it, -32021 with data.requiredCapabilities
    {"sampling": {}} in 2026-07-28 (server-stateless: sep-2575-server-rejects-undeclared-capability)."""
    return "Client declared sampling capability; proceeding."


JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@service.tool(input_schema=JSON_SCHEMA_2020_12)
def json_schema_2020_12_tool(**contact: Any) -> str:
    """Its inputSchema uses $schema, $defs, $anchor, $ref, allOf/anyOf and if/then/else; tools/list
    must carry them unchanged (json-schema-2020-12)."""
    return f"contact accepted: {json.dumps(contact, sort_keys=True)}"


@service.tool(
    input_schema={
        "type": "object",
        "properties": {
            "region": {
                "type": "string",
                "description": "Mirrored into the Mcp-Param-Region header",
                "x-mcp-header": "Region",
                "default": "<none>",
            }
        },
        "additionalProperties": False,
    }
)
def test_x_mcp_header(region: str = "<none>") -> str:
    """A parameter the client mirrors into an Mcp-Param-Region header, which the server checks
    against the body (http-custom-header-server-validation, SEP-2243)."""
    return f"region={region}"


# -- tools: list changes (server-stateless, on a subscriptions/listen stream) ----------------------

def _dynamic_tool() -> str:
    """Added and removed at once by test_trigger_tool_change."""
    return "dynamic"


def _dynamic_prompt() -> str:
    """Added and removed at once by test_trigger_prompt_change."""
    return "dynamic"


@service.tool
def test_trigger_tool_change() -> str:
    """Adds and removes a tool, so listeners get notifications/tools/list_changed."""
    service.add_tool(Tool(_dynamic_tool, name="test_dynamic_tool"))
    service.remove_tool("test_dynamic_tool")
    return "tool list changed"


@service.tool
def test_trigger_prompt_change() -> str:
    """Adds and removes a prompt, so listeners get notifications/prompts/list_changed."""
    service.prompt(name="test_dynamic_prompt")(_dynamic_prompt)
    service.remove_prompt("test_dynamic_prompt")
    return "prompt list changed"


# -- prompts (prompts-*, completion-complete) ------------------------------------------------------

@service.prompt
def test_simple_prompt() -> str:
    """A prompt without arguments (prompts-get-simple)."""
    return "This is a simple prompt for testing."


ARG1_SUGGESTIONS = ["paris", "park", "party", "test", "testing", "tested"]


@service.prompt(complete={"arg1": ARG1_SUGGESTIONS, "arg2": ARG1_SUGGESTIONS})
def test_prompt_with_arguments(
    arg1: Annotated[str, "First test argument"],
    arg2: Annotated[str, "Second test argument"],
) -> str:
    """A prompt with two required arguments, substituted into its text (prompts-get-with-args)."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@service.prompt
def test_prompt_with_embedded_resource(resourceUri: Annotated[str, "URI of the resource to embed"]) -> list[Any]:  # noqa: N803 (the suite's name)
    """A prompt whose first message embeds a resource (prompts-get-embedded-resource)."""
    embedded = {
        "type": "resource",
        "resource": {"uri": resourceUri, "mimeType": "text/plain", "text": "Embedded resource content for testing."},
    }
    return [{"role": "user", "content": embedded}, "Please process the embedded resource above."]


@service.prompt
def test_prompt_with_image() -> list[Any]:
    """A prompt whose first message is an image (prompts-get-with-image)."""
    return [{"role": "user", "content": Image(PNG, mime_type="image/png")}, "Please analyze the image above."]


# -- resources (resources-*, sep-2164-resource-not-found, caching) ---------------------------------

@service.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource (resources-read-text)."""
    return "This is the content of the static text resource."


@service.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource, a PNG image (resources-read-binary)."""
    return PNG


@service.resource("test://template/{id}/data", mime_type="application/json", complete={"id": ["123", "456", "789"]})
def template_data(id: str) -> dict[str, Any]:  # noqa: A002 (the template's variable)
    """A templated resource whose content repeats its {id} (resources-templates-read)."""
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


@service.resource("test://watched-resource", mime_type="text/plain")
def watched() -> str:
    """A resource clients subscribe to (resources-subscribe, resources-unsubscribe)."""
    return "Watched resource content"


# -- asking the client: 2025-11-25 requests mid-call, 2026-07-28 input_required (SEP-2322) ----------

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@service.tool
def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model (tools-call-sampling)."""
    answer = ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {answer['content'].get('text', '')}"


@service.tool
def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a username and an email (tools-call-elicitation)."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = ctx.elicit(message, schema)
    return f"User response: action={answer['action']}, content={json.dumps(answer.get('content'))}"


def _completed(answer: dict[str, Any]) -> str:
    return f"Elicitation completed: action={answer['action']}, content={json.dumps(answer.get('content'))}"


@service.tool
def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """A form whose every field has a default (elicitation-sep1034-defaults)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    return _completed(ctx.elicit("Please review and update the form fields with defaults", schema))


@service.tool
def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Every enum shape of SEP-1330: untitled, titled, legacy enumNames, single and multi select."""
    options = ["option1", "option2", "option3"]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": options},
            "titledSingle": {
                "type": "string",
                "oneOf": [{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"},
                          {"const": "value3", "title": "Third Option"}],
            },
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
            "titledMulti": {
                "type": "array",
                "items": {"anyOf": [{"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"},
                                    {"const": "value3", "title": "Third Choice"}]},
            },
        },
    }
    return _completed(ctx.elicit("Please select from the enum options", schema))


@service.tool
def test_input_required_result_elicitation(ctx: Context) -> str:
    """One question under the key the suite names (basic-elicitation, result-type,
    missing-input-response, ignore-extra-params, validate-input)."""
    answer = ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    return f"Hello, {(answer.get('content') or {}).get('name', 'stranger')}!"


@service.tool
def test_input_required_result_sampling(ctx: Context) -> str:
    """basic-sampling."""
    answer = ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"The model said: {answer['content'].get('text', '')}"


@service.tool
def test_input_required_result_list_roots(ctx: Context) -> str:
    """basic-list-roots."""
    roots = ctx.roots(key="client_roots")
    return "Roots: " + ", ".join(root["uri"] for root in roots)


@service.tool
def test_input_required_result_request_state(ctx: Context) -> str:
    """request-state: the first round carries a sealed requestState, the retry echoes it."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answer = ctx.elicit("Please confirm", schema, key="confirm")
    return f"state-ok: confirmed={(answer.get('content') or {}).get('ok')}"


@service.tool
def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Three questions of three kinds in one round (multiple-input-requests)."""
    name, greeting, roots = ctx.ask(
        Question.elicitation("What is your name?", NAME_FORM, key="user_name"),
        Question.sampling("Generate a greeting", max_tokens=50, key="greeting"),
        Question.roots(key="client_roots"),
    )
    return f"{greeting['content'].get('text', '')} {(name.get('content') or {}).get('name')} ({len(roots)} roots)"


@service.tool
def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two rounds; the first answer survives in the sealed state (multi-round)."""
    name = ctx.elicit("Step 1: What is your name?", NAME_FORM, key="step1")
    color_form = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
    color = ctx.elicit("Step 2: What is your favorite color?", color_form, key="step2")
    return f"{(name.get('content') or {}).get('name')} likes {(color.get('content') or {}).get('color')}"


@service.tool
def test_input_required_result_tampered_state(ctx: Context) -> str:
    """tampered-state: a changed requestState is refused with -32602."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    ctx.elicit("Please confirm", schema, key="confirm")
    return "accepted"


@service.tool
def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what the client declared (capability-check)."""
    declared = ctx.client_capabilities
    questions = []
    if "elicitation" in declared:
        questions.append(Question.elicitation("What is your name?", NAME_FORM, key="user_name"))
    if "sampling" in declared:
        questions.append(Question.sampling("Say hello", max_tokens=20, key="hello"))
    if "roots" in declared:
        questions.append(Question.roots(key="client_roots"))
    answers = ctx.ask(*questions)
    return f"{len(answers)} answer(s) for the declared capabilities"


@service.prompt
def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that asks first (non-tool-request)."""
    schema = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
    answer = ctx.elicit("What context should the prompt use?", schema, key="user_context")
    return f"Use this context: {(answer.get('content') or {}).get('context')}"


# -- tasks (the io.modelcontextprotocol/tasks extension, 2026-07-28: the pending suite's tasks-*) ---
# Plain blocking functions: `task=` says whether a call may (optional) or must (required) become a
# task; the server makes one for a client declaring the extension, and its questions then wait in
# the task's inputRequests for tasks/update instead of answering input_required.

CONFIRM_FORM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


@service.tool
def greet(name: str) -> str:
    """Never a task, even when a legacy params.task asks for one (tasks-lifecycle,
    tasks-request-headers: the text must be exactly "Hello, <name>!")."""
    return f"Hello, {name}!"


@service.tool(task="optional")
def slow_compute(ctx: Context, seconds: int = 3, label: str = "default") -> str:
    """Works `seconds` seconds; a task for a client declaring the extension, an ordinary call for
    one that does not. A cancel ends the wait at once (the task is cancelled before it returns)."""
    if ctx.wait_cancelled(seconds):
        return f"{label}: cancelled"
    return f"{label}: done after {seconds}s"


@service.tool(task="required")
def failing_job(ctx: Context) -> str:
    """A tool error inside a task: the task completes with isError (it did not fail); a client
    without the extension is refused -32021 naming it (tasks-required-task-error)."""
    ctx.wait_cancelled(0.2)
    raise ToolError("the job failed: its input could not be processed")


@service.tool(task="required")
def protocol_error_job(ctx: Context) -> str:
    """A protocol error inside a task: the task fails, with the JSON-RPC error as its `error`."""
    ctx.wait_cancelled(0.2)
    raise McpError(ErrorCode.INTERNAL_ERROR, "the job hit an internal error")


@service.tool(task="required")
def confirm_delete(filename: str, ctx: Context) -> str:
    """Asks for a confirmation from inside the task: input_required until tasks/update answers."""
    answer = ctx.elicit(f"Delete '{filename}'?", CONFIRM_FORM)
    confirmed = answer["action"] == "accept" and (answer.get("content") or {}).get("confirm") is True
    return f"Deleted {filename}" if confirmed else f"Kept {filename}"


@service.tool(task="required")
def multi_input(ctx: Context) -> str:
    """Two questions at once; answering one leaves the other outstanding (tasks-mrtr-input)."""
    name, confirm = ctx.ask(
        Question.elicitation("What is your name?", NAME_FORM, key="name"),
        Question.elicitation("Shall I go on?", CONFIRM_FORM, key="confirm"),
    )
    return f"name={(name.get('content') or {}).get('name')}, confirm={(confirm.get('content') or {}).get('confirm')}"


@service.tool
def test_tool_with_task(ctx: Context) -> Any:
    """Asks first, in the call itself (input_required, key user_name), then starts the work as a
    task with the answer (tasks-mrtr-composition)."""
    answer = ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    name = (answer.get("content") or {}).get("name", "stranger")
    return ctx.run_task(lambda task_ctx: f"Hello, {name}! (computed in task)")


# A fixed secret, for the test fixture only: every process serving it must open the others' states.
REQUEST_STATE_SECRET = "mcpsync-conformance-fixture-secret-0123456789"

server = Server("mcpsync-conformance", services=[service], request_state_secret=REQUEST_STATE_SECRET)


if __name__ == "__main__":
    server.serve_stdio()
