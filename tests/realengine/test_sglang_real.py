"""The real SGLang 0.5.23 on CPU serving the tiny model (issue 35).

One engine for the module (``python -m sglang.launch_server`` on a free loopback port, started
with the flags the seeds' stories turn on), stopped by its pid at the end; at most one SGLang
runs at a time. What runs is SGLang's own code -- HTTP server, tokenizer manager, scheduler,
radix cache, detokenizer, its Llama and the ``torch_native`` attention on CPU -- with
tierctl's ``sgl_kernel`` stand-in importable (no op of it runs for text serving: checked).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tierctl.engines import SGLANG
from tierctl.engines.sglang import CPU_HOST_FLAGS, LAUNCH_MODULE
from tierctl.realengine import env as realenv
from tierctl.realengine import sglang as realsglang

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]

START_TIMEOUT_S = float(os.environ.get("TIERCTL_REAL_START_TIMEOUT_S", "600"))
#: The flags of the seeds' stories (the canary's interval, the ingestion fix), metrics on, and
#: a small chunk so that one long prompt is prefilled in several chunks.
FLAGS = (
    "--enable-metrics",
    "--prefill-decode-interval",
    "2",
    "--enable-dynamic-batch-tokenizer",
    "--chunked-prefill-size",
    "256",
    "--decode-log-interval",
    "4",
)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "State:\tZ" in status.read_text()


@pytest.fixture(scope="module")
def sglang_engine(
    sglang_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[realsglang.SglangEngine]:
    """The module's one SGLang, healthy; stopped (its whole process group) at module end."""
    model = realenv.tiny_model(sglang_python)
    log = tmp_path_factory.mktemp("sglang") / "sglang.log"
    engine = realsglang.SglangEngine(log, flags=FLAGS, python=sglang_python, model=model)
    try:
        engine.start()
        engine.wait_ready(START_TIMEOUT_S)
        yield engine
    finally:
        pid = engine.pid
        engine.stop()
        assert pid is None or _gone(pid)


def _client(engine: realsglang.SglangEngine) -> httpx.Client:
    return httpx.Client(base_url=engine.url, timeout=120)


def _generate(client: httpx.Client, text: str, tokens: int = 16) -> dict[str, Any]:
    resp = client.post(
        "/generate",
        json={"text": text, "sampling_params": {"max_new_tokens": tokens, "temperature": 0.0}},
    )
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def test_it_is_the_real_sglang_launched_as_the_profile_says(
    sglang_engine: realsglang.SglangEngine,
) -> None:
    assert SGLANG.matches_command(sglang_engine.argv[1:])
    assert sglang_engine.argv[1:3] == ["-m", LAUNCH_MODULE]
    assert tuple(sglang_engine.argv[-len(FLAGS) :]) == FLAGS
    joined = " ".join(sglang_engine.argv)
    assert " ".join(CPU_HOST_FLAGS) in joined
    log = sglang_engine.process.log.read_text(errors="replace")
    assert "The server is fired up and ready to roll!" in log
    assert "Load weight end." in log
    assert "type=LlamaForCausalLM" in log


def test_health_generate_and_chat_answer(sglang_engine: realsglang.SglangEngine) -> None:
    with _client(sglang_engine) as client:
        assert client.get("/health").status_code == 200
        first = _generate(client, "the replica serves a request through the router", 12)
        again = _generate(client, "the replica serves a request through the router", 12)
        assert first["meta_info"]["completion_tokens"] == 12
        assert len(first["output_ids"]) == 12
        # Greedy on the same weights: the same tokens; the second prompt came from the radix
        # cache (all but the last prompt token).
        assert again["output_ids"] == first["output_ids"]
        prompt = first["meta_info"]["prompt_tokens"]
        assert again["meta_info"]["cached_tokens"] == prompt - 1
        chat = client.post(
            "/v1/chat/completions",
            json={
                "model": realsglang.SERVED_NAME,
                "messages": [{"role": "user", "content": "is the canary healthy"}],
                "max_tokens": 8,
                "temperature": 0,
            },
        )
        assert chat.status_code == 200, chat.text
        body = chat.json()
        assert body["object"] == "chat.completion"
        assert body["model"] == realsglang.SERVED_NAME
        assert body["usage"]["completion_tokens"] == 8
        assert body["choices"][0]["message"]["role"] == "assistant"


def test_server_info_reports_the_launched_flags(sglang_engine: realsglang.SglangEngine) -> None:
    with _client(sglang_engine) as client:
        info = client.get("/server_info").json()
    assert info["prefill_decode_interval"] == 2
    assert info["enable_dynamic_batch_tokenizer"] is True
    assert info["enable_metrics"] is True
    assert info["chunked_prefill_size"] == 256
    assert info["device"] == "cpu"
    assert info["attention_backend"] == "torch_native"
    assert info["served_model_name"] == realsglang.SERVED_NAME


def test_the_profiles_server_info_gate_confirms_the_argv(
    sglang_engine: realsglang.SglangEngine,
) -> None:
    def fetch(path: str) -> tuple[int, str]:
        try:
            resp = httpx.get(sglang_engine.url + path, timeout=10)
        except httpx.HTTPError:
            return (0, "")
        return (resp.status_code, resp.text)

    argv = sglang_engine.argv[1:]  # python3 -m sglang.launch_server ... as rendered
    check = SGLANG.verify_running_args(argv, fetch)
    assert check.ok, check
    assert {"prefill-decode-interval", "enable-dynamic-batch-tokenizer", "device"} <= set(
        check.verified
    )
    at = argv.index("--prefill-decode-interval")
    wrong = [*argv[: at + 1], "8", *argv[at + 2 :]]
    bad = SGLANG.verify_running_args(wrong, fetch)
    assert bad.mismatches == ("--prefill-decode-interval: rendered 8, engine reports 2",)


def test_metrics_are_real_sglang_series(sglang_engine: realsglang.SglangEngine) -> None:
    with _client(sglang_engine) as client:
        _generate(client, "metrics after a request and its repeat", 4)
        _generate(client, "metrics after a request and its repeat", 4)  # cached tokens
        # A stream: the inter-token latency histogram is observed between streamed chunks.
        with client.stream(
            "POST",
            "/generate",
            json={
                "text": "a streamed request",
                "sampling_params": {"max_new_tokens": 8, "temperature": 0.0},
                "stream": True,
            },
        ) as resp:
            assert resp.status_code == 200
            chunks = [line for line in resp.iter_lines() if line.startswith("data:")]
        assert chunks[-1] == "data: [DONE]"
        text = client.get("/metrics").text
    names = {
        line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and line[0] != "#"
    }
    for role, family in SGLANG.families().items():
        if role.startswith("spec_") or role in ("aborted", "retractions"):
            continue  # speculative decoding only; counted once a request is aborted/retracted
        assert f"sglang:{family}" in names, (role, family)
    assert "sglang:num_running_reqs" in names
    assert 'model_name="tiny-llama"' in text


def test_the_real_scheduler_chunks_a_long_prompt_and_logs_its_batches(
    sglang_engine: realsglang.SglangEngine,
) -> None:
    words = " ".join(f"replica{i} token{i * 7 % 13}" for i in range(300))
    with _client(sglang_engine) as client:
        body = _generate(client, words, 12)
    prompt = body["meta_info"]["prompt_tokens"]
    assert prompt > 3 * 256
    log = sglang_engine.process.log.read_text(errors="replace")
    chunks = [
        line for line in log.splitlines() if "Prefill batch" in line and "#new-token: 256," in line
    ]
    assert len(chunks) >= prompt // 256 - 1, chunks
    stats = SGLANG.decode_log_stats(log)
    assert stats
    assert all(running >= 1 for running, _, _ in stats)


def test_no_op_of_the_sgl_kernel_stand_in_ran(sglang_engine: realsglang.SglangEngine) -> None:
    with _client(sglang_engine) as client:
        _generate(client, "one more request before the log is read", 4)
    log = sglang_engine.process.log.read_text(errors="replace")
    assert "tierctl sgl_kernel stand-in:" not in log


def test_the_real_router_serves_through_the_real_sglang(
    sglang_engine: realsglang.SglangEngine, sglang_python: Path, tmp_path: Path
) -> None:
    from tierctl.proxies.sglang_router import HealthChecks, RouterSettings, SglangRouter

    settings = RouterSettings(
        worker_urls=(sglang_engine.url,),
        health=HealthChecks(interval_s=2, timeout_s=3, failure_threshold=3),
    )
    binary = realenv.router_binary(sglang_python)
    assert binary is not None
    with SglangRouter(settings, tmp_path / "router.log", binary=binary) as router:
        router.start(ready_timeout_s=120)
        assert router.client.health_of() == {sglang_engine.url: True}
        with httpx.Client(base_url=router.url, timeout=120) as client:
            native = _generate(client, "through the router", 6)
            with _client(sglang_engine) as engine_client:
                direct = _generate(engine_client, "through the router", 6)
            assert native["output_ids"] == direct["output_ids"]
            chat = client.post(
                "/v1/chat/completions",
                json={
                    "model": realsglang.SERVED_NAME,
                    "messages": [{"role": "user", "content": "via the gateway"}],
                    "max_tokens": 4,
                },
            )
            assert chat.status_code == 200, chat.text
            assert chat.json()["usage"]["completion_tokens"] == 4
        # Both went through the router (its own counters; its 503s are /readiness polls
        # answered before the worker's first health check).
        counters = router.client.counters()
        assert counters.requests["/generate"] == 1
        assert counters.requests["/v1/chat/completions"] == 1
