"""Prefill/decode disaggregation (sim.disagg): pools, the hand-off queue, the KV transfer.

Laws: no request is lost and every completed one has its tokens; a disaggregated request's
TTFT is at least its prefill alone plus its transfer; no prefill replica sends more than its
slots at once. Shapes: a narrow hand-off queues, a full decode pool back-pressures, and a
decode pool is not stalled by prefills the way a colocated replica is.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import SMALL_SPEC
from tierctl.errors import InputError
from tierctl.sim.config import EngineConfig
from tierctl.sim.disagg_config import DisaggTier, TransferSettings, disaggregated_tier
from tierctl.sim.simulate import compare, simulate
from tierctl.sim.sources import EngineSource
from tierctl.sim.workload import SimRequest, Workload

from .helpers import FLAT

# 1 kB of KV a token over 0.01 GB/s: a 2,000-token prompt crosses in 0.2 s (+ 1 ms).
COST = dataclasses.replace(
    FLAT, kv_bytes_per_token=1000.0, kv_transfer_gb_per_s=0.01, kv_transfer_base_s=0.001
)


def sg(*flags: str) -> EngineConfig:
    return EngineConfig.from_argv(["--max-total-tokens", "200000", *flags])


def pair(n_prefill: int = 1, n_decode: int = 1, slots: int | None = None, **kw: str) -> DisaggTier:
    members = [(f"p{i}", "argv", sg("--disaggregation-mode", "prefill"), None)
               for i in range(n_prefill)]  # fmt: skip
    decode_pool = kw.get("decode_pool", "200000")
    members += [
        (f"d{i}", "argv", EngineConfig.from_argv(
            ["--max-total-tokens", decode_pool, "--disaggregation-mode", "decode"]), None)
        for i in range(n_decode)
    ]  # fmt: skip
    arm = disaggregated_tier(members, TransferSettings(slots=slots))
    assert isinstance(arm, DisaggTier)
    return arm


def wl(n: int = 8, gap: float = 0.2, inp: int = 2000, out: int = 50) -> Workload:
    return Workload.of("w", [SimRequest(f"r{i}", gap * i, inp, out) for i in range(n)])


def test_ttft_carries_the_transfer_and_decode_is_not_stalled_by_prefills() -> None:
    colo = simulate(sg(), wl(), COST)
    dis = simulate(pair(), wl(), COST)
    assert dis.summary.completion == colo.summary.completion == 1.0
    for c, d in zip(colo.requests, dis.requests, strict=True):
        assert d.output_tokens == c.output_tokens == 50
        assert d.ttft_s is not None
        assert c.ttft_s is not None
        assert d.ttft_s >= c.ttft_s + COST.kv_transfer_s(2000) - 1e-12
    # Colocated, every arriving prompt's chunks stall the decoding requests (SGLang runs
    # prefill first); the decode pool runs no prefill, so decoding finishes sooner.
    assert (dis.summary.stall_max_s or 0) < (colo.summary.stall_max_s or 0)
    assert dis.handoff["transfers"] == 8
    assert dis.handoff["transfer_p50_s"] == pytest.approx(COST.kv_transfer_s(2000))


def test_a_narrow_hand_off_queues_and_wider_slots_wait_less() -> None:
    burst = wl(n=6, gap=0.0)
    narrow = simulate(pair(slots=1), burst, COST)
    wide = simulate(pair(slots=4), burst, COST)
    assert narrow.handoff["peak_concurrent_transfers"] == 1
    assert wide.handoff["peak_concurrent_transfers"] <= 4
    assert narrow.handoff["handoff_wait_max_s"] > wide.handoff["handoff_wait_max_s"]
    assert (narrow.summary.ttft_p95_s or 0) > (wide.summary.ttft_p95_s or 0)
    assert narrow.summary.completion == wide.summary.completion == 1.0


def test_a_full_decode_pool_back_pressures_the_hand_off() -> None:
    # Room for about one prompt plus SGLang's 512 reserved decode tokens at a time.
    small = simulate(pair(decode_pool="3200"), wl(n=4, gap=0.0, out=200), COST)
    roomy = simulate(pair(), wl(n=4, gap=0.0, out=200), COST)
    assert small.summary.completion == 1.0
    assert small.handoff["handoff_wait_max_s"] > roomy.handoff["handoff_wait_max_s"]


def test_a_decode_pool_that_can_never_take_a_prompt_ends_said_so_never_hangs() -> None:
    res = simulate(pair(decode_pool="1000"), wl(n=2), COST)
    assert res.summary.completion == 0.0
    assert "unfinished" in res.stopped
    assert {r.status for r in res.requests} == {"unfinished"}


def test_two_prefill_replicas_share_the_arrivals() -> None:
    burst = wl(n=8, gap=0.0)
    one = simulate(pair(1, 1), burst, COST)
    two = simulate(pair(2, 1), burst, COST)
    assert two.handoff["prefill_replicas"] == 2
    assert (two.summary.ttft_p95_s or 0) < (one.summary.ttft_p95_s or 0)


rows_st = st.lists(
    st.tuples(st.floats(0, 3, allow_nan=False), st.integers(1, 4000), st.integers(1, 120)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=30, deadline=None)
@given(rows_st, st.integers(1, 3), st.integers(1, 2), st.integers(1, 4), st.booleans())
def test_disaggregation_laws(
    rows: list[tuple[float, int, int]], n_p: int, n_d: int, slots: int, vllm: bool
) -> None:
    reqs = [SimRequest(f"r{i}", t, a, b) for i, (t, a, b) in enumerate(rows)]
    load = Workload.of("h", reqs)
    arm = _vllm_pair(n_p, n_d, slots) if vllm else pair(n_p, n_d, slots)
    res = simulate(arm, load, COST)
    assert res.stopped == ""
    assert {r.rid for r in res.requests} == {r.rid for r in reqs}  # none lost, none doubled
    assert res.handoff["peak_concurrent_transfers"] <= slots
    lone_cfg = arm.prefill[0]
    for r in res.requests:
        req = next(x for x in reqs if x.rid == r.rid)
        assert r.status == "completed"
        assert r.output_tokens == req.output_tokens
        lone = simulate(lone_cfg, Workload.of("1", [dataclasses.replace(req, arrival_s=0.0)]), COST)
        alone = lone.requests[0].ttft_s
        assert alone is not None
        assert r.ttft_s is not None
        assert r.ttft_s >= alone + COST.kv_transfer_s(req.input_tokens) - 1e-9


def _vllm_pair(n_p: int, n_d: int, slots: int | None = None) -> DisaggTier:
    def cfg(role: str) -> EngineConfig:
        kv = f'{{"kv_connector": "NixlConnector", "kv_role": "{role}"}}'
        return EngineConfig.from_argv(
            ["vllm", "serve", "m", "--num-gpu-blocks-override", "20000", "--max-model-len",
             "8192", "--max-num-batched-tokens", "1024", "--kv-transfer-config", kv]
        )  # fmt: skip

    members = [(f"p{i}", "argv", cfg("kv_producer"), None) for i in range(n_p)]
    members += [(f"d{i}", "argv", cfg("kv_consumer"), None) for i in range(n_d)]
    arm = disaggregated_tier(members, TransferSettings(slots=slots))
    assert isinstance(arm, DisaggTier)
    return arm


def test_vllm_kv_both_needs_its_side_said_and_then_pairs() -> None:
    both = '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'
    argv = ("vllm", "serve", "m", "--max-model-len", "8192", "--kv-transfer-config", both)
    with pytest.raises(InputError) as caught:
        EngineSource(argv, more=(argv,)).arm()
    assert "say which" in str(caught.value)
    assert "prefill:" in (caught.value.fix or "")
    arm = EngineSource(("prefill:", *argv), more=(("decode:", *argv),)).arm()
    assert isinstance(arm, DisaggTier)
    assert (len(arm.prefill), len(arm.decode)) == (1, 1)


def test_sglang_roles_from_the_flag_and_the_transfer_backend() -> None:
    p = ("--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl")
    d = ("--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "nixl")
    arm = EngineSource(p, more=(d,)).arm()
    assert isinstance(arm, DisaggTier)
    assert arm.slots == 4  # SGLang's transfer queues, from its profile


@pytest.mark.parametrize(
    ("argvs", "words", "path"),
    [
        ([("--disaggregation-mode", "prefill")], "no decode pool", "--disaggregation-mode"),
        ([("--disaggregation-mode", "prefill"), ()], "is colocated", "--disaggregation-mode"),
        ([("--disaggregation-mode", "both")], "not one of", "--disaggregation-mode"),
        (
            [("--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl"),
             ("--disaggregation-mode", "decode")],
            "different KV transfer backends", "transfer backend",
        ),
        ([("--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "rdma")],
         "not one of", "--disaggregation-transfer-backend"),
        ([("decode:--disaggregation-mode", "prefill"), ("--disaggregation-mode", "decode")],
         "given as decode", "--disaggregation-mode"),
        ([("vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector": "NixlConnector"}')],
         "sets no kv_role", "--kv-transfer-config"),
    ],
)  # fmt: skip
def test_invalid_combinations_are_refused_where_they_are(
    argvs: list[tuple[str, ...]], words: str, path: str
) -> None:
    with pytest.raises(InputError) as caught:
        EngineSource(argvs[0], more=tuple(argvs[1:])).arm()
    assert words in str(caught.value)
    assert caught.value.location is not None
    assert caught.value.location.path == path
    assert caught.value.fix


def test_two_engines_cannot_pair() -> None:
    with pytest.raises(InputError) as caught:
        EngineSource(
            ("--disaggregation-mode", "prefill"),
            more=(("vllm", "serve", "m", "--kv-transfer-config",
                   '{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}'),),
        ).arm()  # fmt: skip
    assert "different engines" in str(caught.value)


def test_compare_a_colocated_arm_against_a_disaggregated_one() -> None:
    cmp = compare(sg(), pair(), wl(), COST)
    assert cmp.candidate.handoff["transfers"] == 8
    assert cmp.control.handoff == {}
    assert "disaggregation-mode" not in cmp.not_modelled


def _pd_spec(tmp_path: Path) -> Path:
    text = SMALL_SPEC.read_text()
    text = text.replace(
        "replicas:\n  r1: {gpus: [0]}\n  r2: {gpus: [1]}\n",
        "replicas:\n  r1: {gpus: [0]}\n"
        "  p1: {gpus: [1], args: {disaggregation-mode: prefill}}\n"
        "  d1: {gpus: [2], args: {disaggregation-mode: decode}}\n",
    )
    assert "p1:" in text
    out = tmp_path / "tier.yaml"
    out.write_text(text)
    shutil.copytree(SMALL_SPEC.parent, tmp_path / "x", dirs_exist_ok=True)
    return out


def test_sim_compare_and_run_take_a_spec_pool_pair(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    spec = _pd_spec(tmp_path)
    common = ["--workload", "burst", "--count", "4", "--input-tokens", "4000",
              "--output-tokens", "64", "--preset", "dense-8b-h100"]  # fmt: skip
    res = run_cli("sim", "compare", "--spec", str(spec), "--control-replica", "r1",
                  "--candidate-replica", "p1,d1", *common)  # fmt: skip
    assert res.code == 0, res.err
    assert "candidate: disaggregated: 1 prefill + 1 decode replicas, 4 KV transfers" in res.out
    assert "131,072 B of KV a token over 40 GB/s" in res.out
    run = run_cli("sim", "run", "--spec", str(spec), "--replica", "p1,d1",
                  "--transfer-slots", "1", "--kv-transfer-gb-per-s", "10", *common)  # fmt: skip
    assert run.code == 0, run.err
    assert "of 1 slots per prefill replica" in run.out
    assert "over 10 GB/s" in run.out
    lone = run_cli("sim", "run", "--spec", str(spec), "--replica", "p1", *common)
    assert lone.code == 2
    assert "no decode pool" in lone.err
    assert "replicas.p1" in lone.err


def test_a_prefill_replica_with_an_interval_defers_and_still_finishes() -> None:
    # Each extend arms the countdown; a prefill server has nothing to decode, so the deferred
    # rounds idle (they changed the countdown: the replica must not be parked on them).
    members = [
        ("p", "argv", sg("--disaggregation-mode", "prefill", "--prefill-decode-interval", "2",
                         "--chunked-prefill-size", "500"), None),
        ("d", "argv", sg("--disaggregation-mode", "decode"), None),
    ]  # fmt: skip
    arm = disaggregated_tier(members)
    res = simulate(arm, wl(n=4, gap=0.0), COST)
    assert res.stopped == ""
    assert res.summary.completion == 1.0
    assert res.deferred_rounds > 0
