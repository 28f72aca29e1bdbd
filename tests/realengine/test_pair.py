"""The real engines and the real router: what every other real-engine test stands on."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from tests.realengine.fixtures import EnginePair
from tierctl.realengine import env as realenv
from tierctl.realengine.tiny_model import DONE, HEADS, HIDDEN, LAYERS, VOCAB

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]


def _completion(url: str, prompt: str = "The engine", max_tokens: int = 8) -> dict[str, object]:
    resp = httpx.post(
        f"{url}/v1/completions",
        json={"model": "tiny-llama", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0},
        timeout=120,
    )
    assert resp.status_code == 200, resp.text
    body: dict[str, object] = resp.json()
    return body


def _metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def test_tiny_model_has_the_measured_shape(tiny_model: Path) -> None:
    import json

    config = json.loads((tiny_model / "config.json").read_text())
    assert (config["hidden_size"], config["num_attention_heads"]) == (HIDDEN, HEADS)
    assert config["hidden_size"] // config["num_attention_heads"] == 64  # CPU attention needs 64
    assert (config["num_hidden_layers"], config["vocab_size"]) == (LAYERS, VOCAB)
    assert (tiny_model / DONE).exists()
    assert (
        "chat_template" in (tiny_model / "tokenizer_config.json").read_text()
        or (tiny_model / "chat_template.jinja").exists()
    )


def test_tiny_model_is_made_deterministically(
    vllm_python: Path, tiny_model: Path, tmp_path: Path
) -> None:
    import subprocess

    from tierctl.realengine import tiny_model as recipe

    out = tmp_path / "again"
    subprocess.run(
        [str(vllm_python), recipe.__file__, str(out)],
        check=True,
        capture_output=True,
        env=realenv.engine_env(),
        timeout=600,
    )

    def digest(folder: Path) -> dict[str, str]:
        return {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir())
            if p.is_file()
        }

    assert digest(out) == digest(tiny_model)


def test_both_engines_serve_greedy_completions_identically(vllm_pair: EnginePair) -> None:
    a = _completion(vllm_pair.urls[0])
    b = _completion(vllm_pair.urls[1])
    # Same weights, same flags, greedy: the same text from both replicas.
    assert a["choices"][0]["text"] == b["choices"][0]["text"]  # type: ignore[index]
    assert a["usage"]["completion_tokens"] == 8  # type: ignore[index]
    models = httpx.get(f"{vllm_pair.urls[0]}/v1/models", timeout=30).json()
    assert models["data"][0]["id"] == "tiny-llama"


def test_router_spreads_requests_over_both_engines(vllm_pair: EnginePair, real_router) -> None:  # type: ignore[no-untyped-def]
    before = [_metric(u, "vllm:request_success_total") for u in vllm_pair.urls]
    for i in range(6):
        _completion(real_router.url, prompt=f"request {i}", max_tokens=2)
    after = [_metric(u, "vllm:request_success_total") for u in vllm_pair.urls]
    served = [a - b for a, b in zip(after, before, strict=True)]
    assert sum(served) == 6
    assert all(s >= 1 for s in served), served  # round robin reaches both
    health = real_router.client.health_of()
    assert set(health) == set(vllm_pair.urls)
    assert all(health.values())
    counters = real_router.client.counters()
    assert counters.requests.get("/v1/completions", 0) >= 6
