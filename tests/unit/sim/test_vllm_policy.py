"""vLLM v1's scheduling policy: decode first, a token budget, chunked prefill, preemption."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.errors import InputError
from tierctl.sim.config import EngineConfig, step_cost_differences, unmodelled_differences
from tierctl.sim.engine import make_scheduler
from tierctl.sim.simulate import simulate
from tierctl.sim.vllm_policy import VllmScheduler
from tierctl.sim.workload import SimRequest, Workload, hammer

from .helpers import FLAT


def vcfg(*flags: str) -> EngineConfig:
    return EngineConfig.from_argv(["vllm", "serve", "/models/m", *flags], strict=True)


def decoders_then_prompt(prompt_tokens: int = 5000) -> Workload:
    reqs = [SimRequest(f"dec-{i}", 0.0, 100, 200) for i in range(3)]
    reqs.append(SimRequest("long", 0.5, prompt_tokens, 10))
    return Workload.of("dec+long", reqs)


def test_vllm_argv_selects_the_vllm_policy_and_reads_its_flags() -> None:
    cfg = vcfg(
        "--max-num-batched-tokens", "512", "--max-num-seqs", "4", "--no-enable-prefix-caching"
    )
    assert cfg.engine == "vllm"
    assert cfg.model_path == "/models/m"
    assert cfg.port == 8000
    assert (cfg.max_num_batched_tokens, cfg.max_num_seqs) == (512, 4)
    assert cfg.enable_prefix_caching is False
    sched = make_scheduler(cfg, FLAT)
    assert isinstance(sched, VllmScheduler)
    assert (sched.token_budget, sched.max_running, sched.cache) == (512, 4, None)


def test_module_launcher_and_human_sizes() -> None:
    cfg = EngineConfig.from_argv(
        ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m",
         "--max-model-len", "32k", "-tp", "8"]
    )  # fmt: skip
    assert cfg.engine == "vllm"
    assert (cfg.model_path, cfg.max_model_len, cfg.tp_size) == ("/m", 32000, 8)


def test_a_long_prompt_does_not_starve_decode() -> None:
    # Budget 1000 tokens per step: the 3 decoders take 3, the prompt gets the rest each step,
    # so every decoder produces a token every step while the prompt prefills.
    res = simulate(vcfg("--max-num-batched-tokens", "1000"), decoders_then_prompt(), FLAT)
    by = {r.rid: r for r in res.requests}
    # one step with a 997-token chunk costs 0.0997 s (+ decode marginal 0): never a long stall
    assert by["dec-0"].itl_max_s is not None
    assert by["dec-0"].itl_max_s < 0.11
    # the prompt's 5000 tokens take ceil(5000/997) = 6 steps
    assert by["long"].status == "completed"


def test_sglang_interval_zero_starves_decode_where_vllm_does_not() -> None:
    sg = simulate(
        EngineConfig.from_argv(["--chunked-prefill-size", "1000"]), decoders_then_prompt(), FLAT
    )
    vl = simulate(vcfg("--max-num-batched-tokens", "1000"), decoders_then_prompt(), FLAT)
    sg_stall = max(r.itl_max_s or 0 for r in sg.requests if r.rid.startswith("dec"))
    vl_stall = max(r.itl_max_s or 0 for r in vl.requests if r.rid.startswith("dec"))
    assert sg_stall > 0.45  # five back-to-back 0.1 s chunks
    assert vl_stall < 0.11
    assert sg.summary.stall_max_s is not None
    assert sg.summary.stall_max_s > vl.summary.stall_max_s


def _chunks(argv: EngineConfig, reqs: list[SimRequest]) -> list[tuple[int, ...]]:
    rounds: list = []
    simulate(argv, Workload.of("w", reqs), FLAT, steps=rounds)
    return [tuple(c for c, _ in r.chunks) for r in rounds if r.chunks]


def test_long_prefill_threshold_caps_each_chunk_when_another_request_is_eligible() -> None:
    flags = ("--max-num-batched-tokens", "1000", "--long-prefill-token-threshold", "300")
    two = [SimRequest("a", 0.0, 1200, 2), SimRequest("b", 0.0, 100, 50)]
    # a capped at 300 while b is eligible (b's 100 fit beside it in the first step)
    assert _chunks(vcfg(*flags), two)[:2] == [(300, 100), (300,)]


def test_a_lone_request_is_not_capped_by_the_threshold() -> None:
    # vLLM 0.32 (scheduler.py): the threshold is 0 unless running + waiting > 1, "since there
    # is no other request for it to starve": the lone prompt takes the whole budget.
    flags = ("--max-num-batched-tokens", "1000", "--long-prefill-token-threshold", "300")
    assert _chunks(vcfg(*flags), [SimRequest("a", 0.0, 1200, 2)]) == [(1000,), (200,)]


def test_max_num_partial_prefills_is_refused_as_vllm_refuses_it() -> None:
    # No catalogued vLLM release has the flag (0.32's parser exits on it): never modelled.
    with pytest.raises(InputError) as exc:
        vcfg("--max-num-partial-prefills", "2", "--max-model-len", "10000")
    text = exc.value.format()
    assert "--max-num-partial-prefills is not a flag of vllm 0.33.0" in text
    assert "catalog show vllm==0.33.0" in text
    with pytest.raises(InputError, match=r"not a flag of vllm 0\.32\.0"):
        EngineConfig.from_argv(
            ["vllm", "serve", "m", "--max-num-partial-prefills", "2"], version="0.32.0", strict=True
        )


def test_a_misspelt_flag_gets_the_catalogs_did_you_mean() -> None:
    with pytest.raises(InputError) as exc:
        vcfg("--max-num-batch-tokens", "512")
    assert "did you mean --max-num-batched-tokens" in exc.value.format()


def test_chunked_prefill_off_with_a_budget_below_the_model_length_is_refused() -> None:
    # vLLM 0.32 verify_max_model_len refuses to start; the simulator used to hang on it.
    with pytest.raises(InputError) as exc:
        make_scheduler(
            vcfg("--no-enable-chunked-prefill", "--max-num-batched-tokens", "512",
                 "--max-model-len", "4096"),
            FLAT,
        )  # fmt: skip
    text = exc.value.format()
    assert "max_num_batched_tokens (512) is smaller than max_model_len (4096)" in text
    assert "--max-num-batched-tokens" in text


def test_budget_below_max_num_seqs_and_threshold_over_model_len_are_refused() -> None:
    with pytest.raises(InputError, match=r"must be greater than or equal to max_num_seqs \(16\)"):
        make_scheduler(vcfg("--max-num-batched-tokens", "8", "--max-num-seqs", "16"), FLAT)
    with pytest.raises(InputError, match="cannot be greater than the max_model_len"):
        make_scheduler(
            vcfg("--long-prefill-token-threshold", "5000", "--max-model-len", "4096"), FLAT
        )


def test_a_scheduler_that_can_schedule_nothing_ends_the_run_instead_of_hanging() -> None:
    # A policy stuck with work queued (what chunked prefill off with a prompt over the budget
    # was): zero-length idle rounds used to spin for ever; the run now ends and says why.
    from tierctl.sim.engine import Round
    from tierctl.sim.simulate import MAX_STEPS, _run

    class Stuck(VllmScheduler):
        def step(self, now_s: float) -> Round | None:
            self.stats.rounds += 1
            return Round(now_s, 0.0, "idle", (), 0, 0)

    sched = Stuck(vcfg(), FLAT)
    reqs = (SimRequest("a", 0.0, 100, 2), SimRequest("b", 5.0, 100, 2))
    now, why = _run(sched, reqs, FLAT, math.inf, True, None, None, MAX_STEPS)
    assert "could schedule none of the 2 waiting request(s)" in why
    assert now == 5.0  # it jumped to the last arrival, then stopped
    assert sched.stats.rounds == 2


def test_the_step_bound_stops_a_run_and_says_so() -> None:
    wl = Workload.of("w", [SimRequest(f"r{i}", 0.0, 100, 500) for i in range(4)])
    res = simulate(vcfg(), wl, FLAT, max_steps=50, fast_forward=False)
    assert "stopped after 50 scheduler steps" in res.stopped
    assert {r.status for r in res.requests} == {"unfinished"}


def test_without_chunked_prefill_a_prompt_over_the_budget_waits_for_a_whole_step() -> None:
    rounds: list = []
    simulate(
        vcfg(
            "--max-num-batched-tokens",
            "2000",
            "--no-enable-chunked-prefill",
            "--max-model-len",
            "2000",
        ),
        Workload.of("two", [SimRequest("a", 0.0, 1500, 2), SimRequest("b", 0.0, 1500, 2)]),
        FLAT,
        steps=rounds,
    )
    prefill_chunks = [r.chunks for r in rounds if r.chunks]
    assert prefill_chunks[0] == ((1500, 0),)  # b does not fit the remaining 500: not split
    assert prefill_chunks[1][0][0] == 1500


def test_max_num_seqs_bounds_the_running_set() -> None:
    reqs = [SimRequest(f"r{i}", 0.0, 50, 20) for i in range(6)]
    rounds: list = []
    simulate(vcfg("--max-num-seqs", "2"), Workload.of("six", reqs), FLAT, steps=rounds)
    assert max(r.batch_size for r in rounds) <= 2


def test_kv_exhaustion_preempts_the_last_request_and_it_still_completes() -> None:
    # 100 blocks of 16 = 1600 tokens of KV; two requests of 500 + 600 outputs cannot both
    # finish without one being preempted and recomputed.
    reqs = [SimRequest("a", 0.0, 500, 600), SimRequest("b", 0.0, 500, 600)]
    res = simulate(
        vcfg("--num-gpu-blocks-override", "100", "--max-num-batched-tokens", "2048"),
        Workload.of("kv", reqs),
        FLAT,
    )
    assert [r.status for r in res.requests] == ["completed", "completed"]
    assert [r.output_tokens for r in res.requests] == [600, 600]
    sched = make_scheduler(
        vcfg("--num-gpu-blocks-override", "100", "--max-num-batched-tokens", "2048"), FLAT
    )
    for r in reqs:
        sched.submit(r, 0.0)
    now = 0.0
    while sched.busy:
        rnd = sched.step(now)
        assert rnd is not None
        assert sched.kv_used_tokens <= sched.kv_pool_tokens
        now += rnd.duration_s
    assert sched.stats.preemptions >= 1


def test_prompt_over_max_model_len_is_refused() -> None:
    sched = make_scheduler(vcfg("--max-model-len", "1000"), FLAT)
    assert sched.submit(SimRequest("x", 0.0, 900, 200), 0.0) == "too_long"


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    budget=st.sampled_from([256, 1024, 4096]),
    threshold=st.sampled_from([0, 128]),
    blocks=st.sampled_from([None, 400]),
)
def test_fast_forward_matches_stepping_and_every_request_completes(
    seed: int, budget: int, threshold: int, blocks: int | None
) -> None:
    flags = [
        "--max-num-batched-tokens",
        str(budget),
        "--long-prefill-token-threshold",
        str(threshold),
    ]
    if blocks is not None:
        flags += ["--num-gpu-blocks-override", str(blocks)]
    wl = hammer(random.Random(seed), rate_per_s=4.0, duration_s=8.0, input_tokens=(20, 900),
                output_tokens=(5, 300))  # fmt: skip
    cfg = vcfg(*flags)
    fast = simulate(cfg, wl, FLAT)
    slow = simulate(cfg, wl, FLAT, fast_forward=False)
    assert [r.status for r in slow.requests] == ["completed"] * len(wl.requests)
    for a, b in zip(fast.requests, slow.requests, strict=True):
        assert a.rid == b.rid
        assert a.output_tokens == b.output_tokens
        assert abs((a.e2e_s or 0) - (b.e2e_s or 0)) < 1e-6


def test_flags_that_differ_and_are_not_modelled_are_named() -> None:
    a = vcfg("--max-num-seqs", "256", "--port", "8001", "--gpu-memory-utilization", "0.8")
    b = vcfg("--max-num-seqs", "512", "--port", "8002", "--gpu-memory-utilization", "0.9",
             "--enforce-eager", "--kv-cache-dtype", "fp8")  # fmt: skip
    assert unmodelled_differences(a, b) == ["gpu-memory-utilization"]
    assert step_cost_differences(a, b) == ["enforce-eager", "kv-cache-dtype"]
    sg_a = EngineConfig.from_argv(["--tp-size", "4", "--dist-init-addr", "h:1"])
    sg_b = EngineConfig.from_argv(["--tp-size", "8", "--dist-init-addr", "h:2"])
    assert unmodelled_differences(sg_a, sg_b) == ["tp-size"]


def test_priority_policy_admits_by_priority_then_arrival() -> None:
    reqs = [SimRequest("first", 0.0, 500, 5, priority=5), SimRequest("urgent", 0.0, 500, 5,
            priority=0), SimRequest("second", 0.0, 500, 5, priority=5)]  # fmt: skip
    fcfs = simulate(vcfg("--max-num-seqs", "1"), Workload.of("w", reqs), FLAT)
    prio = simulate(vcfg("--max-num-seqs", "1", "--scheduling-policy", "priority"),
                    Workload.of("w", reqs), FLAT)  # fmt: skip

    def order(res: object) -> list[str]:
        return [r.rid for r in sorted(res.requests, key=lambda r: r.ttft_s or 0)]  # type: ignore[attr-defined]

    assert order(fcfs) == ["first", "urgent", "second"]
    assert order(prio) == ["urgent", "first", "second"]


def test_priority_policy_preempts_the_lowest_priority_request() -> None:
    # KV for ~1600 tokens: two requests growing to 1100 each cannot both stay. FCFS preempts
    # the last admitted (b); the priority policy the lowest priority (a, admitted first).
    reqs = [SimRequest("a", 0.0, 500, 600, priority=9), SimRequest("b", 0.0, 500, 600, priority=1)]
    flags = ("--num-gpu-blocks-override", "100", "--max-num-batched-tokens", "2048")
    fcfs = {r.rid: r for r in simulate(vcfg(*flags), Workload.of("kv", reqs), FLAT).requests}
    prio = {
        r.rid: r
        for r in simulate(
            vcfg(*flags, "--scheduling-policy", "priority"), Workload.of("kv", reqs), FLAT
        ).requests
    }
    assert fcfs["b"].preemptions > 0
    assert fcfs["a"].preemptions == 0
    assert prio["a"].preemptions > 0
    assert prio["b"].preemptions == 0
    assert {r.status for r in prio.values()} == {"completed"}
