"""Tests for mcpsync.catalog.questions: what a function may ask the client, as plain data.

Everything here is pure: the builders' params (what the client receives), the default keys, the
`inputRequests` entry shape, the handshake-era request params, the answer checks per method and
the capability matrix (which -32021 a client that did not declare something gets).
"""

from __future__ import annotations

from typing import Any

import pytest

from mcpsync.catalog.questions import (
    ELICIT,
    ROOTS,
    SAMPLE,
    InputRequired,
    KeyAssigner,
    NeedAnswers,
    Question,
    checked_answer,
    input_request,
    missing_capability,
    request_params,
)
from mcpsync.protocol.jsonrpc import ErrorCode, McpError

pytestmark = pytest.mark.timeout(30)

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ACCEPT = {"action": "accept", "content": {"name": "octocat"}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris."}, "model": "m", "stopReason": "endTurn"}
ROOTS_RESULT = {"roots": [{"uri": "file:///home/user/project", "name": "project"}]}


# -- builders ---------------------------------------------------------------------------------------

def test_an_elicitation_carries_its_message_and_schema() -> None:
    question = Question.elicitation("Your GitHub username?", SCHEMA, key="github_login")
    assert question == Question(ELICIT, {"message": "Your GitHub username?", "requestedSchema": SCHEMA}, "github_login")


def test_an_elicitation_without_a_schema_asks_for_an_empty_form() -> None:
    question = Question.elicitation("Proceed?")
    assert question.method == "elicitation/create"
    assert question.params == {"message": "Proceed?", "requestedSchema": {"type": "object", "properties": {}}}
    assert question.key is None


def test_an_elicitation_copies_the_schema_it_was_given() -> None:
    schema = {"type": "object", "properties": {}}
    question = Question.elicitation("x", schema)
    schema["title"] = "changed later"
    assert "title" not in question.params["requestedSchema"]


def test_a_url_elicitation_names_its_mode_and_url() -> None:
    question = Question.elicitation_url("Sign in", "https://example.com/login", key="signin")
    assert question == Question(ELICIT, {"mode": "url", "message": "Sign in", "url": "https://example.com/login"}, "signin")


def test_sampling_from_a_str_is_one_user_text_message() -> None:
    question = Question.sampling("What is the capital of France?", max_tokens=100)
    assert question.method == "sampling/createMessage"
    assert question.params == {
        "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
        "maxTokens": 100,
    }


def test_sampling_options_are_sent_in_camel_case() -> None:
    question = Question.sampling(
        [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        max_tokens=7,
        system_prompt="Be brief.",
        temperature=0.0,
        stop_sequences=("END",),
        model_preferences={"hints": [{"name": "claude"}]},
        include_context="thisServer",
        metadata={"trace": 1},
        key="k",
    )
    assert question.key == "k"
    assert question.params == {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 7,
        "systemPrompt": "Be brief.",
        "temperature": 0.0,  # falsy, still sent
        "stopSequences": ["END"],  # a list on the wire, whatever sequence was given
        "modelPreferences": {"hints": [{"name": "claude"}]},
        "includeContext": "thisServer",
        "metadata": {"trace": 1},
    }


def test_sampling_copies_the_messages() -> None:
    message = {"role": "user", "content": {"type": "text", "text": "hi"}}
    question = Question.sampling([message], max_tokens=1)
    message["role"] = "assistant"
    assert question.params["messages"][0]["role"] == "user"


def test_roots_has_no_params() -> None:
    assert Question.roots() == Question(ROOTS, {}, None)
    assert Question.roots(key="r").key == "r"


def test_keyed_gives_a_new_question_with_the_key() -> None:
    question = Question.roots()
    keyed = question.keyed("mine")
    assert keyed == Question(ROOTS, {}, "mine")
    assert question.key is None
    with pytest.raises(AttributeError):
        question.key = "x"  # type: ignore[misc]  # frozen


# -- keys -------------------------------------------------------------------------------------------

def test_default_keys_number_each_kind_in_asking_order() -> None:
    assigner = KeyAssigner()
    asked = [
        Question.elicitation("a"),
        Question.sampling("b", max_tokens=1),
        Question.elicitation("c"),
        Question.roots(),
        Question.elicitation("d", key="explicit"),
        Question.sampling("e", max_tokens=1),
        Question.elicitation("f"),
    ]
    keys = [assigner.key_for(question).key for question in asked]
    assert keys == ["elicitation-1", "sampling-1", "elicitation-2", "roots-1", "explicit", "sampling-2", "elicitation-3"]


def test_a_fresh_assigner_gives_the_same_keys_again() -> None:
    def run() -> list[str | None]:
        assigner = KeyAssigner()
        return [assigner.key_for(q).key for q in (Question.roots(), Question.elicitation("x"), Question.roots())]

    assert run() == run() == ["roots-1", "elicitation-1", "roots-2"]


# -- wire shapes ------------------------------------------------------------------------------------

def test_an_input_request_is_method_and_params_only() -> None:
    question = Question.elicitation("Proceed?", key="go")
    assert input_request(question) == {"method": "elicitation/create", "params": question.params}
    sampling = Question.sampling("x", max_tokens=3, key="s")
    assert input_request(sampling) == {"method": "sampling/createMessage", "params": sampling.params}


def test_a_roots_input_request_has_no_params() -> None:
    assert input_request(Question.roots(key="roots")) == {"method": "roots/list"}


def test_a_2026_url_elicitation_has_no_elicitation_id() -> None:
    entry = input_request(Question.elicitation_url("Sign in", "https://example.com", key="u"))
    assert entry == {"method": "elicitation/create", "params": {"mode": "url", "message": "Sign in", "url": "https://example.com"}}


def test_a_handshake_url_elicitation_carries_a_fresh_elicitation_id() -> None:
    question = Question.elicitation_url("Sign in", "https://example.com")
    first, second = request_params(question), request_params(question)
    assert isinstance(first["elicitationId"], str) and first["elicitationId"]
    assert first["elicitationId"] != second["elicitationId"]
    assert {k: v for k, v in first.items() if k != "elicitationId"} == question.params
    assert "elicitationId" not in question.params  # the question itself is untouched


@pytest.mark.parametrize(
    "question",
    [Question.elicitation("form", SCHEMA), Question.sampling("x", max_tokens=2), Question.roots()],
    ids=["form", "sampling", "roots"],
)
def test_other_handshake_requests_carry_the_params_as_built(question: Question) -> None:
    assert request_params(question) == question.params


# -- answers ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "answer",
    [
        ACCEPT,
        {"action": "accept"},  # URL mode: no content
        {"action": "decline"},
        {"action": "cancel", "content": None},
        {"action": "accept", "content": {"n": 1, "ok": True, "tags": ["a"]}},
    ],
)
def test_a_valid_elicit_result_is_returned_as_sent(answer: dict[str, Any]) -> None:
    assert checked_answer(Question.elicitation("x", key="e"), answer) is answer


@pytest.mark.parametrize(
    "answer",
    [SAMPLED, {"role": "user", "content": [{"type": "text", "text": "a"}], "model": "m"}],
)
def test_a_valid_create_message_result_is_returned_as_sent(answer: dict[str, Any]) -> None:
    assert checked_answer(Question.sampling("x", max_tokens=1, key="s"), answer) is answer


def test_roots_answers_give_the_list() -> None:
    assert checked_answer(Question.roots(key="r"), ROOTS_RESULT) == ROOTS_RESULT["roots"]
    assert checked_answer(Question.roots(key="r"), {"roots": []}) == []


BAD_ANSWERS = [
    (Question.elicitation("x", key="login"), 12345, "not an object"),
    (Question.elicitation("x", key="login"), {"action": "maybe"}, "action"),
    (Question.elicitation("x", key="login"), {"content": {}}, "action"),
    (Question.elicitation("x", key="login"), {"action": "accept", "content": ["a"]}, "content"),
    (Question.sampling("x", max_tokens=1, key="capital"), "Paris", "not an object"),
    (Question.sampling("x", max_tokens=1, key="capital"), {**SAMPLED, "role": "system"}, "role"),
    (Question.sampling("x", max_tokens=1, key="capital"), {**SAMPLED, "content": "Paris."}, "content"),
    (Question.sampling("x", max_tokens=1, key="capital"), {"role": "assistant", "content": {"type": "text", "text": "x"}}, "model"),
    (Question.roots(key="where"), [], "not an object"),
    (Question.roots(key="where"), {}, "roots"),
    (Question.roots(key="where"), {"roots": [{"name": "no uri"}]}, "roots"),
    (Question.roots(key="where"), {"roots": [{"uri": 7}]}, "roots"),
    (Question.roots(key="where"), {"roots": "file:///"}, "roots"),
]


@pytest.mark.parametrize(("question", "answer", "problem"), BAD_ANSWERS)
def test_a_malformed_answer_is_invalid_params_naming_the_key(question: Question, answer: Any, problem: str) -> None:
    with pytest.raises(McpError) as caught:
        checked_answer(question, answer)
    assert caught.value.code == ErrorCode.INVALID_PARAMS == -32602
    assert question.key is not None and question.key in caught.value.message
    assert problem in caught.value.message
    assert caught.value.data == {"key": question.key}


def test_a_malformed_answer_to_an_unkeyed_question_names_the_method() -> None:
    with pytest.raises(McpError) as caught:
        checked_answer(Question.roots(), None)
    assert "roots/list" in caught.value.message


# -- capabilities -----------------------------------------------------------------------------------

FORM = Question.elicitation("x")
URL = Question.elicitation_url("x", "https://example.com")
SAMPLING = Question.sampling("x", max_tokens=1)
SAMPLING_WITH_TOOLS = Question(SAMPLE, {"messages": [], "maxTokens": 1, "tools": [{"name": "t", "inputSchema": {}}]})
LIST_ROOTS = Question.roots()

CAPABILITY_MATRIX = [
    # (question, declared, what the client would have to declare; None: it may be asked)
    (FORM, {}, {"elicitation": {}}),
    (FORM, {"elicitation": True}, {"elicitation": {}}),
    (FORM, {"elicitation": {}}, None),  # {} means form only
    (FORM, {"elicitation": {"form": {}}}, None),
    (FORM, {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
    (FORM, {"elicitation": {"form": {}, "url": {}}}, None),
    (URL, {}, {"elicitation": {"url": {}}}),
    (URL, {"elicitation": {}}, {"elicitation": {"url": {}}}),
    (URL, {"elicitation": {"form": {}}}, {"elicitation": {"url": {}}}),
    (URL, {"elicitation": {"url": {}}}, None),
    (URL, {"elicitation": {"form": {}, "url": {}}}, None),
    (FORM, {"sampling": {}, "roots": {}}, {"elicitation": {}}),
    (SAMPLING, {}, {"sampling": {}}),
    (SAMPLING, {"elicitation": {}, "roots": {}}, {"sampling": {}}),
    (SAMPLING, {"sampling": {}}, None),
    (SAMPLING_WITH_TOOLS, {"sampling": {}}, {"sampling": {"tools": {}}}),
    (SAMPLING_WITH_TOOLS, {"sampling": {"tools": {}}}, None),
    (SAMPLING_WITH_TOOLS, {}, {"sampling": {}}),
    (LIST_ROOTS, {}, {"roots": {}}),
    (LIST_ROOTS, {"roots": None}, {"roots": {}}),
    (LIST_ROOTS, {"roots": {}}, None),
    (LIST_ROOTS, {"roots": {"listChanged": True}}, None),
]


@pytest.mark.parametrize(("question", "declared", "required"), CAPABILITY_MATRIX)
@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28", None])
def test_the_capability_matrix(question: Question, declared: dict[str, Any], required: dict[str, Any] | None, version: str | None) -> None:
    refusal = missing_capability(question, declared, version)
    if required is None:
        assert refusal is None
        return
    assert refusal is not None
    assert refusal.code == ErrorCode.MISSING_CLIENT_CAPABILITY == -32021
    assert refusal.data == {"requiredCapabilities": required}
    assert "did not declare" in refusal.message


@pytest.mark.parametrize(
    ("question", "declared", "version", "needed"),
    [
        (FORM, {"elicitation": {}}, "2025-03-26", "2025-06-18"),
        (FORM, {"elicitation": {}}, "2024-11-05", "2025-06-18"),
        (URL, {"elicitation": {"url": {}}}, "2025-06-18", "2025-11-25"),
        (URL, {"elicitation": {"url": {}}}, "2025-03-26", "2025-11-25"),
    ],
)
def test_elicitation_is_refused_on_a_protocol_version_without_it(question: Question, declared: dict[str, Any], version: str, needed: str) -> None:
    refusal = missing_capability(question, declared, version)
    assert refusal is not None
    assert refusal.code == -32021
    assert version in refusal.message and needed in refusal.message
    assert refusal.data == {"requiredCapabilities": {"elicitation": {"url": {}} if question is URL else {}}}


@pytest.mark.parametrize(
    ("question", "declared", "version"),
    [
        (FORM, {"elicitation": {}}, "2025-06-18"),
        (URL, {"elicitation": {"url": {}}}, "2025-11-25"),
        (SAMPLING, {"sampling": {}}, "2024-11-05"),
        (LIST_ROOTS, {"roots": {}}, "2024-11-05"),
    ],
)
def test_each_kind_is_allowed_from_the_version_that_has_it(question: Question, declared: dict[str, Any], version: str) -> None:
    assert missing_capability(question, declared, version) is None


# -- control flow -----------------------------------------------------------------------------------

def test_need_answers_is_not_an_exception_so_handlers_cannot_swallow_it() -> None:
    need = NeedAnswers([Question.roots(key="r")], state={"step": 2})
    assert isinstance(need, BaseException) and not isinstance(need, Exception)
    assert need.questions == (Question.roots(key="r"),)
    assert need.state == {"step": 2}


def test_input_required_defaults_to_no_questions_and_no_state() -> None:
    value = InputRequired()
    assert tuple(value.questions) == () and value.state is None
