"""Request parsing: every client mistake is a 400 with an OpenAI-style body."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.sim.openai_io import DEFAULT_MAX_TOKENS, ApiError, parse


def test_chat_request_is_templated_and_defaults_apply() -> None:
    g = parse({"messages": [{"role": "user", "content": "hi"}]}, chat=True)
    assert g.text is not None
    assert "hi" in g.text
    assert "<|user|>" in g.text
    assert (g.max_tokens, g.stream, g.include_usage) == (DEFAULT_MAX_TOKENS, False, False)


def test_completion_accepts_token_ids_and_one_string_lists() -> None:
    assert parse({"prompt": [1, 2, 3]}, chat=False).token_ids == (1, 2, 3)
    assert parse({"prompt": ["abc"]}, chat=False).text == "abc"


def test_text_parts_are_joined() -> None:
    g = parse(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                   {"type": "text", "text": "b"}]}]},
        chat=True,
    )  # fmt: skip
    assert g.text is not None
    assert "ab" in g.text


@pytest.mark.parametrize(
    ("body", "chat", "param"),
    [
        ([], True, None),
        ({"messages": []}, True, "messages"),
        ({"messages": [{"content": "x"}]}, True, "messages"),
        ({"messages": [{"role": "user", "content": 5}]}, True, "messages"),
        ({"prompt": "x", "max_tokens": 0}, False, "max_tokens"),
        ({"prompt": "x", "max_tokens": True}, False, "max_tokens"),
        ({"prompt": "x", "stream": "yes"}, False, "stream"),
        ({"prompt": "x", "n": 2}, False, "n"),
        ({"prompt": {"a": 1}}, False, "prompt"),
        ({"prompt": [True, 1]}, False, "prompt"),
    ],
)
def test_bad_bodies_are_400s(body: object, chat: bool, param: str | None) -> None:
    with pytest.raises(ApiError) as exc:
        parse(body, chat=chat)
    err = exc.value.body()["error"]
    assert exc.value.status == 400
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param
    assert err["message"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**9) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(
        st.sampled_from(["messages", "prompt", "max_tokens", "stream", "stream_options", "n",
                         "model", "role", "content", "type", "text", "include_usage"]),
        inner,
        max_size=5,
    ),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_json, st.booleans())
def test_any_json_body_is_parsed_or_refused_with_an_api_error(body: object, chat: bool) -> None:
    try:
        g = parse(body, chat=chat)
    except ApiError as exc:
        status = exc.status
    else:
        status = 200
        assert (g.text is None) != (g.token_ids is None)
        assert g.max_tokens >= 1
    assert status in (200, 400)
