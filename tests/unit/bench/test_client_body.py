"""Request bodies: the streamed body is byte-identical to the one-piece body."""

from __future__ import annotations

import asyncio

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.bench.client import RequestShape, build_body, encode_body, stream_body

CHAT = RequestShape(api="chat", model="m", ignore_eos=True, timeout_s=1)
COMPLETIONS = RequestShape(api="completions", model="m", ignore_eos=False, timeout_s=1)


def _streamed(shape: RequestShape, prompt: str, chunk: int) -> bytes:
    async def collect() -> bytes:
        return b"".join([piece async for piece in stream_body(shape, prompt, 7, chunk)])

    return asyncio.run(collect())


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300), st.integers(min_value=1, max_value=50), st.booleans())
def test_streamed_body_equals_encoded_body(prompt, chunk, chat):
    # Law: splitting the prompt anywhere (quotes, escapes, astral characters) changes nothing.
    shape = CHAT if chat else COMPLETIONS
    assert _streamed(shape, prompt, chunk) == encode_body(shape, prompt, 7)


def test_body_shape():
    chat = orjson.loads(encode_body(CHAT, "hi", 5))
    assert chat["messages"] == [{"role": "user", "content": "hi"}]
    assert chat["stream"] is True
    assert chat["stream_options"] == {"include_usage": True}
    assert chat["ignore_eos"] is True
    assert chat["min_tokens"] == 5
    assert chat["max_tokens"] == 5
    comp = build_body(COMPLETIONS, "hi", 3)
    assert comp["prompt"] == "hi"
    assert "ignore_eos" not in comp


def test_a_prompt_of_token_ids_is_sent_as_ids_and_only_to_the_completions_api():
    import pytest

    from tierctl.errors import InputError

    body = orjson.loads(encode_body(COMPLETIONS, (5, 6, 7), 2))
    assert body["prompt"] == [5, 6, 7]
    with pytest.raises(InputError, match="token ids needs the completions API") as exc:
        build_body(CHAT, [5, 6, 7], 2)
    assert exc.value.params == ("api",)


def test_per_chunk_usage_is_asked_with_the_profiles_own_options():
    import dataclasses

    from tierctl.engines import PROFILES

    for profile in PROFILES.values():
        shape = dataclasses.replace(COMPLETIONS, per_chunk_usage=profile.per_chunk_usage)
        options = build_body(shape, "hi", 3)["stream_options"]
        assert options == {"include_usage": True, **(profile.per_chunk_usage or {})}
    assert build_body(COMPLETIONS, "hi", 3)["stream_options"] == {"include_usage": True}
