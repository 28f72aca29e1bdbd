"""Issue #40: the defects the held-out what-if check exposed, each pinned."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from tierctl.sim.config import EngineConfig
from tierctl.sim.uncertainty import what_if
from tierctl.sim.workload import hammer

from .helpers import FLAT

JITTERY = dataclasses.replace(FLAT, name="jittery", step_jitter=0.2, round_overhead_s=1e-3)
WL = hammer(random.Random(0), rate_per_s=6.0, duration_s=5.0, input_tokens=(64, 512),
            output_tokens=(8, 64))  # fmt: skip


def _vllm(*flags: str) -> EngineConfig:
    return EngineConfig.from_argv(["vllm", "serve", "m", *flags], engine="vllm")


def test_a_dtype_change_alone_is_not_modelled_never_no_measurable_effect() -> None:
    # --dtype float32 against bfloat16 printed 1.00 "no measurable effect" on every figure.
    wi = what_if(_vllm("--dtype", "bfloat16"), _vllm("--dtype", "float32"), WL, JITTERY, draws=6)
    assert wi.rows
    for r in wi.rows:
        assert r.verdict == "not modelled: --dtype", r
        assert r.left_out == ("dtype",)
    # The same arms without the difference: judged as before.
    same = what_if(_vllm("--dtype", "bfloat16"), _vllm("--dtype", "bfloat16"), WL, JITTERY,
                   draws=6)  # fmt: skip
    assert all(not r.verdict.startswith("not modelled") and not r.left_out for r in same.rows)


def test_a_dtype_change_beside_a_modelled_one_keeps_its_verdict_and_names_what_it_leaves_out() -> (
    None
):
    wi = what_if(_vllm("--dtype", "bfloat16"), _vllm("--dtype", "float32", "--max-num-seqs", "1"),
                 WL, JITTERY, draws=6)  # fmt: skip
    ttft = next(r for r in wi.rows if r.metric == "TTFT p50")
    assert ttft.verdict == "worse (leaves out --dtype)"


def test_the_cli_json_carries_the_not_modelled_verdict(run_cli: Callable[..., Any]) -> None:
    res = run_cli("sim", "compare", "--engine", "vllm", "--control", "vllm serve m --dtype bfloat16",
                  "--candidate", "vllm serve m --dtype float32", "--workload", "burst",
                  "--count", "2", "--input-tokens", "300", "--output-tokens", "4", "--json")  # fmt: skip
    assert res.code == 0, res.err
    table = json.loads(res.out)["table"]
    assert {r["verdict"] for r in table} == {"not modelled: --dtype"}
    assert all(r["left_out"] == ["dtype"] for r in table)


# -- the KV block: 128 tokens on CPU (vLLM 0.32), 16 on CUDA, said when unknown -----------

CPU = dataclasses.replace(FLAT, name="cpu-fit", device="cpu")
CUDA = dataclasses.replace(FLAT, name="gpu-fit", device="cuda")
UNKNOWN = dataclasses.replace(FLAT, name="fit-somewhere", device="")


def _sched(cost: Any, *flags: str) -> Any:
    from tierctl.sim.engine import make_scheduler

    return make_scheduler(_vllm(*flags), cost, seed=0)


def test_the_pool_of_an_override_is_blocks_of_the_devices_size() -> None:
    from tierctl.sim.vllm_policy import block_size_note

    override = ("--num-gpu-blocks-override", "24")
    assert _sched(CPU, *override).kv_pool_tokens == 24 * 128
    assert _sched(CUDA, *override).kv_pool_tokens == 24 * 16
    assert _sched(CPU, *override, "--block-size", "32").kv_pool_tokens == 24 * 32
    assert block_size_note(_vllm(*override), CPU) is None
    assert block_size_note(_vllm(*override, "--block-size", "16"), UNKNOWN) is None
    # Unknown device: CUDA's 16, said so (on CPU that pool was 8x too small, silently).
    assert _sched(UNKNOWN, *override).kv_pool_tokens == 24 * 16
    note = block_size_note(_vllm(*override), UNKNOWN)
    assert note is not None
    assert "24 blocks of 16 tokens" in note
    assert "cuda 16, cpu 128" in note
    assert block_size_note(_vllm(), UNKNOWN) is None  # no pool sized in blocks


def test_the_cli_warns_for_a_pool_in_blocks_of_unknown_size(
    run_cli: Callable[..., Any], tmp_path: Any
) -> None:
    from tierctl.sim.costfile import write_cost_model

    model = tmp_path / "m.json"
    write_cost_model(model, UNKNOWN, {})
    args = ("sim", "compare", "--engine", "vllm", "--cost-model", str(model), "--workload",
            "burst", "--count", "2", "--input-tokens", "300", "--output-tokens", "4")  # fmt: skip
    res = run_cli(*args, "--control", "vllm serve m --num-gpu-blocks-override 64",
                  "--candidate", "vllm serve m --num-gpu-blocks-override 64 --max-num-seqs 1")  # fmt: skip
    assert res.code == 0, res.err
    assert res.err.count("warning: --num-gpu-blocks-override 64: the KV pool is taken as") == 1
    quiet = run_cli(*args, "--control", "vllm serve m --num-gpu-blocks-override 64 --block-size 128",
                    "--candidate", "vllm serve m --num-gpu-blocks-override 64 --block-size 128 "
                    "--max-num-seqs 1")  # fmt: skip
    assert "KV pool is taken as" not in quiet.err


def test_a_decoder_takes_a_new_block_only_when_its_last_is_full() -> None:
    from tierctl.sim.workload import SimRequest

    sched = _sched(CPU, "--num-gpu-blocks-override", "10")  # 128-token blocks
    sched.submit(SimRequest("a", 0.0, 100, 200), 0.0)
    now, used = 0.0, []
    for _ in range(60):
        rnd = sched.step(now)
        assert rnd is not None
        now += rnd.duration_s
        used.append(sched.kv_used_tokens)
    live = sched.lives["a"]
    assert live.kv_slots == 100 + live.generated - 1
    # Step k feeds output k: the prompt and outputs 1-28 fill the first block (128 slots),
    # feeding output 29 takes the second.
    assert used[0] == 128
    assert set(used) == {128, 256}
    assert used.index(256) == 29


def _iteration_log(tmp_path: Any, platform: str | None) -> Any:
    rng = random.Random(3)
    lines = [f"INFO 12-07 20:01:02 [__init__.py:217] Automatically detected platform {platform}."]
    lines = lines if platform else []
    for i in range(40):
        ctx = rng.choice([0, rng.randint(16, 512)])
        gen = rng.randint(1, 6)
        ms = (6.0 + 0.04 * ctx if ctx else 9.0) + 0.5 * gen
        lines.append(
            f"(APIServer pid=1) INFO 12-01 09:21:35 [loggers.py:199] Engine 000: Iteration({i}): "
            f"{1 if ctx else 0} context requests, {ctx} context tokens, {gen} generation "
            f"requests, {gen} generation tokens, iteration elapsed time: {ms:.2f} ms"
        )
    log = tmp_path / f"vllm-{platform}.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_a_fit_reads_its_device_from_the_engine_log(
    run_cli: Callable[..., Any], tmp_path: Any
) -> None:
    from tierctl.sim.costfile import read_cost_model

    argv = ("--", "vllm", "serve", "/m", "--max-num-batched-tokens", "512")
    for platform, flag, want in (("cpu", (), "cpu"), (None, (), ""), (None, ("--device", "cpu"),
                                 "cpu"), ("cpu", ("--device", "unknown"), "")):  # fmt: skip
        out = tmp_path / f"m-{platform}-{len(flag)}.json"
        res = run_cli("sim", "fit", str(_iteration_log(tmp_path, platform)), "--preset",
                      "dense-8b-h100", "--out", str(out), *flag, *argv)  # fmt: skip
        assert res.code == 0, res.err
        model, prov = read_cost_model(out)
        # Never the base preset's ("cuda": another machine).
        assert model.device == want, (platform, flag)
        assert prov["device"]["device"] == want


def test_a_cost_model_file_with_a_bad_device_is_refused(tmp_path: Any) -> None:
    import pytest

    from tierctl.errors import InputError
    from tierctl.sim.costfile import read_cost_model

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "tierctl-cost-model", "format": 1,
                               "model": {"base": "dense-8b-h100", "device": "tpu"}}))  # fmt: skip
    with pytest.raises(InputError, match="device"):
        read_cost_model(bad)
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({"kind": "tierctl-cost-model", "format": 1,
                              "model": {"base": "dense-8b-h100"}}))  # fmt: skip
    assert read_cost_model(ok)[0].device == "cuda"  # the base preset's GPU


# -- preemption: vLLM admits a waiting request only when its whole prompt fits -------------


def _long_and_short(seed: int = 7, n: int = 36) -> Any:
    import math

    from tierctl.sim.workload import SimRequest, Workload

    rng = random.Random(seed)
    reqs = []
    for i in range(n):
        prompt = round(math.exp(rng.uniform(math.log(32), math.log(2600))))
        reqs.append(SimRequest(f"r{i}", 0.25 * i, prompt, rng.randint(16, 128)))
    return Workload.of("long and short", reqs)


SLOW_CPU = dataclasses.replace(
    FLAT, name="cpu", device="cpu", prefill_base_s=0.0115, prefill_per_token_s=6.9e-5,
    prefill_attn_pair_s=1.0e-7, decode_base_s=0.0052, decode_per_seq_s=3e-4,
    decode_per_ctx_token_s=1e-6, round_overhead_s=0.0019,
)  # fmt: skip


def test_the_full_prompt_gate_keeps_preemption_from_thrashing() -> None:
    # Issue #40: ~100 preemptions a run predicted against 11 real. A prompt admitted on its
    # first chunk took the pool chunk by chunk and preempted the decoders, again and again;
    # vLLM 0.32 (scheduler_reserve_full_isl, on by default) admits it only when its whole
    # prompt fits.
    from tierctl.sim.simulate import simulate

    flags = ("--max-model-len", "4096", "--max-num-seqs", "8", "--max-num-batched-tokens",
             "512", "--num-gpu-blocks-override", "24")  # fmt: skip
    wl = _long_and_short()
    gated = simulate(_vllm(*flags), wl, SLOW_CPU)
    ungated = simulate(_vllm(*flags, "--no-scheduler-reserve-full-isl"), wl, SLOW_CPU)
    assert gated.summary.completion == ungated.summary.completion == 1.0
    assert ungated.summary.preemptions >= 10 * max(1, gated.summary.preemptions)
    assert gated.summary.preemptions <= 10


def test_a_prompt_whose_first_chunk_fits_but_not_its_whole_waits() -> None:
    from tierctl.sim.workload import SimRequest

    # 8 blocks of 16 = 128 tokens; a decoder holds 2 blocks; a 100-token prompt's first
    # 32-token chunk fits the 6 free blocks, its whole prompt (7 blocks) does not.
    flags = ("--num-gpu-blocks-override", "8", "--block-size", "16",
             "--max-num-batched-tokens", "32")  # fmt: skip
    for gate, admitted in (((), False), (("--no-scheduler-reserve-full-isl",), True)):
        sched = _sched(CUDA, *flags, *gate)
        sched.submit(SimRequest("dec", 0.0, 20, 40), 0.0)
        rnd = sched.step(0.0)
        assert rnd is not None
        sched.submit(SimRequest("long", 0.0, 100, 4), 0.0)
        sched.step(rnd.duration_s)
        assert (sched.lives["long"].status == "prefilling") is admitted, gate


def test_the_watermark_keeps_blocks_free_for_admission() -> None:
    from tierctl.sim.workload import SimRequest

    flags = ("--num-gpu-blocks-override", "10", "--block-size", "16")
    for watermark, admitted in (("0", True), ("0.5", False)):
        sched = _sched(CUDA, *flags, "--watermark", watermark)
        sched.submit(SimRequest("dec", 0.0, 20, 40), 0.0)
        rnd = sched.step(0.0)
        assert rnd is not None
        sched.submit(SimRequest("next", 0.0, 60, 4), 0.0)  # 4 blocks of the 8 free
        sched.step(rnd.duration_s)
        assert (sched.lives["next"].status != "waiting") is admitted, watermark


# -- sglang #40443's per-request decode rate, three ways ----------------------------------


def test_decode_rates_mean_median_and_pooled() -> None:
    from tierctl.sim.result import RequestResult, decode_rates

    def req(rid: str, out: int, ttft: float, e2e: float, status: str = "completed") -> Any:
        return RequestResult(rid, 0.0, 10, 0, out, status, 0.0, 0.0, ttft, None, None, e2e)

    rates = decode_rates([
        req("a", 11, 1.0, 11.0),  # 10 tokens in 10 s: 1 tok/s
        req("b", 11, 1.0, 3.0),  # 10 in 2 s: 5 tok/s
        req("c", 101, 2.0, 3.0),  # 100 in 1 s: 100 tok/s (the lone last request)
        req("d", 1, 1.0, 1.0),  # one token: no decode
        req("e", 50, 1.0, 9.0, status="aborted"),
    ])  # fmt: skip
    assert rates.requests == 3
    assert rates.mean == pytest.approx((1 + 5 + 100) / 3)
    assert rates.median == pytest.approx(5.0)
    assert rates.pooled == pytest.approx(120 / 13)
    assert decode_rates([]).pooled is None
