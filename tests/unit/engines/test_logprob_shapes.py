"""The profiles read teacher-forced logprobs in each engine's own shape."""

from __future__ import annotations

from typing import Any

import pytest

from tierctl.engines import LogprobShapeError, TokenScore, profile_for

# Cut from a real vLLM 0.32.0 (CPU) answer to prompt_logprobs: 1 for the tiny Llama.
VLLM_BODY: dict[str, Any] = {
    "choices": [
        {
            "index": 0,
            "text": "y",
            "prompt_logprobs": [
                None,
                {
                    "74": {"logprob": -7.806010723114014, "rank": 1339, "decoded_token": "e"},
                    "77": {"logprob": -6.374485969543457, "rank": 1, "decoded_token": "h"},
                },
                {"81": {"logprob": -6.5, "rank": 1, "decoded_token": "l"}},
            ],
        }
    ]
}

SGLANG_BODY: dict[str, Any] = {
    "text": " the",
    "meta_info": {
        "input_token_logprobs": [[None, 10, None], [-2.5, 11, None], [-0.1, 12, None]],
        "input_top_logprobs": [None, [[-0.7, 40, None]], [[-0.1, 12, None]]],
    },
}


def test_vllm_prompt_logprobs() -> None:
    scores = profile_for("vllm").parse_prompt_logprobs(VLLM_BODY)
    assert scores == [
        TokenScore(74, -7.806010723114014, 77, -6.374485969543457),
        TokenScore(81, -6.5, 81, -6.5),  # the prompt token is the top one: one entry
    ]


def test_sglang_input_token_logprobs() -> None:
    scores = profile_for("sglang").parse_prompt_logprobs(SGLANG_BODY)
    assert scores == [TokenScore(11, -2.5, 40, -0.7), TokenScore(12, -0.1, 12, -0.1)]


def test_requests_ask_for_prompt_logprobs_in_each_shape() -> None:
    path, body = profile_for("vllm").prompt_logprobs_request("m", "some text")
    assert path == "/v1/completions"
    assert (body["prompt"], body["prompt_logprobs"], body["temperature"]) == ("some text", 1, 0.0)
    path, body = profile_for("sglang").prompt_logprobs_request("m", "some text")
    assert path == "/generate"
    assert body["return_logprob"] is True
    assert (body["logprob_start_len"], body["top_logprobs_num"]) == (0, 1)


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
@pytest.mark.parametrize(
    "body",
    [{}, {"choices": []}, {"meta_info": {}}, {"choices": [{"prompt_logprobs": [None, {"1": {}}]}]}],
)
def test_other_shapes_are_refused(kind: str, body: dict[str, Any]) -> None:
    with pytest.raises(LogprobShapeError, match="shape"):
        profile_for(kind).parse_prompt_logprobs(body)
