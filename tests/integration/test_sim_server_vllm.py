"""`tierctl sim serve` answering as vLLM (and SGLang's remaining routes), on loopback."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tierctl.engines import profile_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def serve(*argv: str, env: dict[str, str] | None = None) -> AsyncIterator[tuple[str, str]]:
    """Start `tierctl sim serve -- ARGV`; yields (base URL, start-up output)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    cmd = [sys.executable, "-m", "tierctl", "sim", "serve", "--time-scale", "100", "--preset",
           "dense-8b-h100", "--", *argv]  # fmt: skip
    proc = subprocess.Popen(  # noqa: ASYNC220
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env
    )
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        url = None
        while url is None:
            line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
            assert line, f"server exited: {''.join(seen)}"
            seen.append(line)
            m = re.search(r"listening on (http://\S+)", line)
            url = m.group(1) if m else None
        yield url, "".join(seen)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


VLLM_ARGV = ("vllm", "serve", "/models/llama", "--served-model-name", "llama-sim",
             "--max-model-len", "4096", "--max-num-seqs", "8", "--no-enable-prefix-caching",
             "--host", "127.0.0.1", "--port", "0")  # fmt: skip


async def test_vllm_surface_routes_metrics_and_argv_verification() -> None:
    async with serve(*VLLM_ARGV) as (url, startup), aiohttp.ClientSession() as s:
        assert "non-default args: {" in startup
        async with s.get(url + "/health") as r:
            assert r.status == 200
        async with s.get(url + "/version") as r:
            assert (await r.json())["version"]
        for sglang_only in ("/server_info", "/health_generate", "/model_info"):
            async with s.get(url + sglang_only) as r:
                assert r.status == 404, sglang_only
        async with s.get(url + "/v1/models") as r:
            card = (await r.json())["data"][0]
        assert (card["id"], card["owned_by"], card["max_model_len"]) == ("llama-sim", "vllm", 4096)
        async with s.get(url + "/v1/models/llama-sim") as r:
            assert r.status == 200
        async with s.get(url + "/v1/models/other") as r:
            assert r.status == 404

        body = {"model": "llama-sim", "prompt": "hello " * 40, "max_tokens": 12, "stream": True}
        async with s.post(url + "/v1/completions", json=body) as r:
            assert r.status == 200
            chunks = [ln async for ln in r.content if ln.startswith(b"data: {")]
        assert len(chunks) == 12
        too_long = {"model": "llama-sim", "prompt": [7] * 4000, "max_tokens": 200}
        async with s.post(url + "/v1/completions", json=too_long) as r:
            assert r.status == 400
            assert "maximum context length is 4096" in (await r.json())["error"]["message"]

        async with s.get(url + "/metrics") as r:
            text = await r.text()
        assert "sglang" not in text
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        ok = [x for x in fams["vllm:request_success"].samples if x.name.endswith("_total")]
        assert {x.labels["finished_reason"]: x.value for x in ok} == {"length": 1.0, "abort": 1.0}
        info = fams["vllm:cache_config_info"].samples[0].labels
        assert info["enable_prefix_caching"] == "False"
        assert fams["vllm:num_requests_running"].samples[0].labels == {
            "model_name": "llama-sim",
            "engine": "0",
        }
        gen = [x for x in fams["vllm:generation_tokens"].samples if x.name.endswith("_total")]
        assert gen[0].value == 12

        def fetch(path: str) -> tuple[int, str]:
            import urllib.request

            with urllib.request.urlopen(url + path, timeout=30) as resp:
                return resp.status, resp.read().decode()

        expected = [*VLLM_ARGV[:-2], "--port", "8000"]
        check = await asyncio.to_thread(
            profile_for("vllm").verify_running_args, list(expected), fetch, startup
        )
        assert check.error is None
        assert "max-num-seqs" in check.verified
        assert "max-model-len" in check.verified
        assert not [m for m in check.mismatches if "max-num-seqs" in m or "model-len" in m]


async def test_vllm_server_info_only_in_dev_mode() -> None:
    async with (
        serve(*VLLM_ARGV, env={"VLLM_SERVER_DEV_MODE": "1"}) as (url, _),
        aiohttp.ClientSession() as s,
    ):
        async with s.get(url + "/server_info") as r:
            assert r.status == 200
            info = await r.json()
        assert info["max_num_seqs"] == 8
        assert info["max_model_len"] == 4096
        assert None not in info.values()


async def test_sglang_model_info_model_card_get_flush_and_no_nulls() -> None:
    async with (
        serve(
            "python3",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "/models/q",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ) as (url, _),  # fmt: skip
        aiohttp.ClientSession() as s,
    ):
        async with s.get(url + "/model_info") as r:
            assert (await r.json())["model_path"] == "/models/q"
        async with s.get(url + "/v1/models//models/q") as r:  # ids may hold slashes
            assert r.status == 200
            assert (await r.json())["id"] == "/models/q"
        async with s.get(url + "/flush_cache") as r:
            assert r.status == 200
        async with s.get(url + "/server_info") as r:
            info = await r.json()
        assert [k for k, v in info.items() if v is None] == []
        assert info["chunked_prefill_size"] == 8192  # the preset's, as SGLang derives it
        assert info["max_running_requests"] == 256
        body = {"text": "hello there", "sampling_params": {"max_new_tokens": 4}}
        async with s.post(url + "/generate", data=json.dumps(body)) as r:
            assert r.status == 200
            assert (await r.json())["meta_info"]["completion_tokens"] == 4


async def test_sglang_streamed_generate_as_bench_serving_reads_it() -> None:
    async with (
        serve(
            "python3",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "/models/q",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ) as (url, _),  # fmt: skip
        aiohttp.ClientSession() as s,
    ):
        body = {"text": "hello there " * 20, "stream": True,
                "sampling_params": {"max_new_tokens": 6, "ignore_eos": True}}  # fmt: skip
        async with s.post(url + "/generate", json=body) as r:
            assert r.status == 200
            lines = [ln.strip() async for ln in r.content if ln.startswith(b"data: ")]
        assert lines[-1] == b"data: [DONE]"
        events = [json.loads(ln[len(b"data: ") :]) for ln in lines[:-1]]
        assert [e["meta_info"]["completion_tokens"] for e in events] == [1, 2, 3, 4, 5, 6]
        texts = [e["text"] for e in events]
        assert all(b.startswith(a) for a, b in itertools.pairwise(texts))
        assert events[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 6}
        assert events[-1]["meta_info"]["prompt_tokens"] > 20


async def test_generated_text_re_tokenizes_to_the_reported_count() -> None:
    from tierctl.sim.tokenizer import load_tokenizer

    tok = load_tokenizer()
    async with serve(*VLLM_ARGV) as (url, _), aiohttp.ClientSession() as s:
        for n in (1, 7, 64):
            body = {"model": "llama-sim", "prompt": "a b c", "max_tokens": n}
            async with s.post(url + "/v1/completions", json=body) as r:
                doc = await r.json()
            text = doc["choices"][0]["text"]
            assert doc["usage"]["completion_tokens"] == n
            assert len(tok.encode(text, add_special_tokens=False).ids) == n, text
