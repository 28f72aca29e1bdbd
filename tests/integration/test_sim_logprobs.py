"""`sim serve` as a model: deterministic greedy tokens and logprobs in each engine's shape."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import preset
from tierctl.sim.lm import SimLM, model_seed
from tierctl.sim.server import ServeOptions, SimServer
from tierctl.sim.tokenizer import load_tokenizer

pytestmark = pytest.mark.integration

PROMPT = "The proxy probes each backend's health path every few seconds with a timeout."


async def _server(**opts: Any) -> TestServer:
    config = EngineConfig.from_argv(
        ["--model-path", "/models/tiny", "--port", "0", "--enable-metrics"]
    )
    server = SimServer(config, preset("dense-8b-h100"), ServeOptions(time_scale=1000.0, **opts))
    ts = TestServer(server.app(), host="127.0.0.1")
    await ts.start_server()
    return ts


@pytest.fixture
async def url() -> AsyncIterator[str]:
    ts = await _server()
    yield str(ts.make_url("")).rstrip("/")
    await ts.close()


async def _post(url: str, path: str, body: dict[str, Any]) -> Any:
    async with aiohttp.ClientSession() as s, s.post(url + path, json=body) as r:
        assert r.status == 200, await r.text()
        return await r.json()


def _ids(text: str) -> list[int]:
    return list(load_tokenizer().encode(text, add_special_tokens=False).ids)


async def test_greedy_text_is_deterministic_per_prompt(url: str) -> None:
    body = {"prompt": PROMPT, "max_tokens": 12, "temperature": 0}
    one = await _post(url, "/v1/completions", body)
    two = await _post(url, "/v1/completions", body)
    other = await _post(url, "/v1/completions", {**body, "prompt": PROMPT + " Again."})
    text = one["choices"][0]["text"]
    assert text == two["choices"][0]["text"]
    assert text != other["choices"][0]["text"]
    lm = SimLM(model_seed("/models/tiny"))
    assert text == "".join(lm.text(t) for t in lm.generate(_ids(PROMPT), 12))


async def test_vllm_prompt_logprobs_shape(url: str) -> None:
    out = await _post(
        url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 1, "prompt_logprobs": 1}
    )
    plp = out["choices"][0]["prompt_logprobs"]
    ids = _ids(PROMPT)
    assert len(plp) == len(ids) == out["usage"]["prompt_tokens"]
    assert plp[0] is None
    for tok, entry in zip(ids[1:], plp[1:], strict=True):
        assert str(tok) in entry
        ranks = {int(k): v["rank"] for k, v in entry.items()}
        assert 1 in ranks.values()
        assert len(entry) == (1 if ranks[tok] == 1 else 2)
        for v in entry.values():
            assert v["logprob"] <= 0.0
            assert isinstance(v["decoded_token"], str)


async def test_openai_echo_logprobs_cover_prompt_and_output(url: str) -> None:
    out = await _post(
        url,
        "/v1/completions",
        {"prompt": PROMPT, "max_tokens": 4, "logprobs": 2, "echo": True},
    )
    choice = out["choices"][0]
    lp = choice["logprobs"]
    n = len(_ids(PROMPT))
    assert len(lp["tokens"]) == n + 4
    assert lp["token_logprobs"][0] is None
    assert all(x <= 0 for x in lp["token_logprobs"][1:])
    assert choice["text"].startswith(PROMPT)
    # the greedy tokens are each position's most likely token
    for tok, lpv, top in zip(
        lp["tokens"][n:], lp["token_logprobs"][n:], lp["top_logprobs"][n:], strict=True
    ):
        assert len(top) == 2
        assert top[tok] == lpv == max(top.values())


async def test_chat_logprobs_shape(url: str) -> None:
    out = await _post(
        url,
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 3,
            "logprobs": True,
            "top_logprobs": 2,
        },
    )
    content = out["choices"][0]["logprobs"]["content"]
    assert len(content) == 3
    assert "".join(c["token"] for c in content) == out["choices"][0]["message"]["content"]
    for c in content:
        assert c["top_logprobs"][0]["logprob"] == c["logprob"]
        total = sum(math.exp(t["logprob"]) for t in c["top_logprobs"])
        assert 0.5 < total <= 1.0


async def test_sglang_generate_input_token_logprobs(url: str) -> None:
    out = await _post(
        url,
        "/generate",
        {
            "text": PROMPT,
            "sampling_params": {"max_new_tokens": 2, "temperature": 0},
            "return_logprob": True,
            "logprob_start_len": 0,
            "top_logprobs_num": 1,
        },
    )
    meta = out["meta_info"]
    ids = _ids(PROMPT)
    assert meta["prompt_tokens"] == len(ids)
    assert [t[1] for t in meta["input_token_logprobs"]] == ids
    assert meta["input_token_logprobs"][0][0] is None
    assert meta["input_top_logprobs"][0] is None
    assert len(meta["output_token_logprobs"]) == 2
    gen = [t[1] for t in meta["output_token_logprobs"]]
    assert [top[0][1] for top in meta["output_top_logprobs"]] == gen
    lm = SimLM(model_seed("/models/tiny"))
    assert out["text"] == "".join(lm.text(t) for t in gen)


async def test_perturbed_server_differs_at_the_perturbed_positions() -> None:
    a, b = await _server(), await _server(perturb_fraction=0.3)
    try:
        body = {"prompt": PROMPT * 4, "max_tokens": 1, "prompt_logprobs": 1}
        pa = (await _post(str(a.make_url("")).rstrip("/"), "/v1/completions", body))["choices"][0]
        pb = (await _post(str(b.make_url("")).rstrip("/"), "/v1/completions", body))["choices"][0]
        lm = SimLM(model_seed("/models/tiny"), perturb_fraction=0.3)
        expected = [p is not None and p.perturbed for p in lm.teacher_forced(_ids(PROMPT * 4))]

        def top(entry: dict[str, Any] | None) -> str | None:
            if entry is None:
                return None
            return next(k for k, v in entry.items() if v["rank"] == 1)

        differs = [
            top(x) != top(y)
            for x, y in zip(pa["prompt_logprobs"], pb["prompt_logprobs"], strict=True)
        ]
        assert differs == expected
        assert 0 < sum(differs) < len(differs)
    finally:
        await a.close()
        await b.close()


async def test_process_start_time_is_exported() -> None:
    before = time.time()
    ts = await _server()
    try:
        async with aiohttp.ClientSession() as s, s.get(ts.make_url("/metrics")) as r:
            assert r.status == 200
            text = await r.text()
    finally:
        await ts.close()
    (value,) = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("process_start_time_seconds ")
    ]
    assert before - 1 <= value <= time.time()
