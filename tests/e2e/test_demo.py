"""`tierctl demo`: the offline stages on any spec, the acts' preconditions, act 2 for real."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import GLM_SPEC, SMALL_SPEC, CliResult
from tierctl.demo.tier import analyse, old_doc
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec import load_spec_text, resolve_tier


def test_quick_demo_on_the_bundled_spec(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("demo", "--quick")
    assert result.code == 0, result.err
    out = " ".join(result.out.split())  # rich wraps long lines
    for title in ("declare + render", "validate", "simulate (offline what-if)", "done"):
        assert title in out
    assert "is up to date" in out
    assert "0 violations" in out
    # The hand edit is the spec's own canary change applied to the control: caught.
    assert "after a hand edit (r1 takes the canary's --prefill-decode-interval by hand)" in out
    assert "TC001" in out
    assert "act 1" not in out  # --quick runs no servers
    assert "Traceback" not in result.err


def test_quick_demo_on_a_copy_of_small_model(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    spec = tmp_path / "tier.yaml"
    shutil.copy(SMALL_SPEC, spec)  # without its rendered compose file
    result = run_cli("demo", "--quick", "--spec", str(spec))
    assert result.code == 0, result.out + result.err
    result.out = " ".join(result.out.split())  # rich wraps long lines
    assert "is not written yet (`tierctl render --write` writes it)" in result.out
    assert "after a hand edit (r1 gains --max-running-requests 7 by hand): 1 violation(s)" in (
        result.out
    )
    assert "act 1 would be skipped: tier.yaml has 0 canary and 0 control replica(s)" in result.out


def test_a_bad_spec_is_a_located_error(tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    spec = tmp_path / "tier.yaml"
    data = yaml.safe_load(SMALL_SPEC.read_text())
    data["replicas"]["r2"]["gpu"] = [1]
    spec.write_text(yaml.safe_dump(data))
    result = run_cli("demo", "--quick", "--spec", str(spec))
    assert result.code == 2
    assert str(spec) in result.err
    assert "gpu" in result.err
    assert "Traceback" not in result.err


def test_the_canary_change_is_read_from_the_spec() -> None:
    demo = analyse(GLM_SPEC)
    assert demo.require_canary() == ("r1", "r2")
    assert [(c.flag, c.control, c.canary) for c in demo.change] == [
        ("prefill-decode-interval", "1", "2")
    ]
    old = resolve_tier(load_spec_text(dump_yaml(old_doc(demo)), "old.yaml"))
    control, canary = old.replicas["r1"], old.replicas["r2"]
    assert canary.flags["prefill-decode-interval"] == control.flags["prefill-decode-interval"]
    assert canary.variant.replace("-r2", "") == control.variant.replace("-r1", "")


def test_a_canary_that_changes_nothing_says_so(tmp_path: Path) -> None:
    data = yaml.safe_load(SMALL_SPEC.read_text())
    data["replicas"]["r1"]["role"] = "control"
    data["replicas"]["r2"]["role"] = "canary"
    data["telemetry"]["variant"] = "qwen-small-{replica}"
    spec = tmp_path / "tier.yaml"
    spec.write_text(yaml.safe_dump(data))
    demo = analyse(spec)
    assert demo.problem is not None
    assert "canary r2 runs the same flags as control r1" in demo.problem.message
    assert demo.problem.fix is not None
    assert "replicas.r2.args" in demo.problem.fix
    # With a flag to try, the same copy has a canary change, whatever the flag is.
    data["replicas"]["r2"]["args"] = {"max-running-requests": 64}
    spec.write_text(yaml.safe_dump(data))
    demo = analyse(spec)
    assert demo.problem is None
    assert [(c.flag, c.control, c.canary) for c in demo.change] == [
        ("max-running-requests", None, "64")
    ]
    old = resolve_tier(load_spec_text(dump_yaml(old_doc(demo)), "old.yaml"))
    assert "max-running-requests" not in old.replicas["r2"].flags


def test_the_ingestion_burst_blocks_each_loop_for_four_probe_windows() -> None:
    from tierctl.demo.ingestion import BLOCKED_S, BURST, MAX_BURST, burst_size

    assert BLOCKED_S == 8  # 4 x (1 s interval x 2 misses)
    assert burst_size(10.0) == BURST  # a slow machine: the field's count already blocks long
    assert burst_size(2.0) == 8  # each replica 4 x 2 s = 8 s
    assert burst_size(1.75) == 10  # 5 x 1.75 s = 8.75 s each
    assert burst_size(0.5) == 24 == MAX_BURST  # 32 wanted, capped
    assert burst_size(0.0) == MAX_BURST


@pytest.mark.integration
@pytest.mark.slow
def test_act_2_the_real_router_marks_on_loop_replicas_unhealthy(tmp_path: Path) -> None:
    """The ingestion incident through the real sglang-router: with the tokenizer on the loop
    the router loses its workers and fails requests; with the flag it keeps them."""
    from rich.console import Console

    from tierctl.demo.context import DemoContext
    from tierctl.demo.ingestion import stage_ingestion
    from tierctl.realengine.env import router_binary

    if router_binary() is None:
        pytest.skip("sglang-router is not installed (scripts/ensure-vllm installs it)")
    console = Console(width=200, record=True)
    ctx = DemoContext(GLM_SPEC, analyse(GLM_SPEC), console, tmp_path)
    assert stage_ingestion(ctx)
    arms = ctx.facts["ingestion"]
    on_loop, dyntok = arms["on-loop"], arms["dyntok"]
    assert on_loop.flips >= 1
    assert on_loop.router["health checks failed"] > dyntok.router["health checks failed"]
    assert on_loop.client_failed > dyntok.client_failed
    assert on_loop.router["responses 5xx"] > dyntok.router["responses 5xx"]
    assert dyntok.flips < on_loop.flips
    burst = ctx.facts["ingestion_burst"]
    assert 6 <= burst <= 24  # the field's 6, more on a machine that tokenizes fast
    assert on_loop.burst_completed == dyntok.burst_completed == burst
    text = console.export_text()
    assert "the router's own view, same load both passes" in text
    assert "HTTP health check failed" in text  # the router's own log, quoted


@pytest.mark.integration
@pytest.mark.slow
def test_act_1_the_ab_and_the_live_readout_judge_the_same_change(tmp_path: Path) -> None:
    """The whole scheduler act on simulated engines and a real Prometheus: the rollout
    recreates the canary alone, the A/B sees its faster decode, and the readout -- by the
    same rule, over paired steps with both replicas serving -- reaches a verdict that either
    agrees or is explained row by row (never a bare "DIFFERENT")."""
    from rich.console import Console

    from tierctl.demo.canary import LIVE_S, LIVE_STEP_S, stage_canary
    from tierctl.demo.context import DemoContext
    from tierctl.runtime.local_prom import prometheus_binaries

    if prometheus_binaries() is None:
        pytest.skip("prometheus is not installed (scripts/ensure-prometheus installs it)")
    console = Console(width=200, record=True)
    ctx = DemoContext(GLM_SPEC, analyse(GLM_SPEC), console, tmp_path)
    assert stage_canary(ctx)
    text = " ".join(console.export_text().split())
    assert "01-recreate-model-sg-glm53-w4afp8-tp4-r2: done" in text
    assert "02-recreate-otelcol-contrib: done" in text
    # The effect the act is about: interval 2 roughly halves TPOT in the A/B; never a fail.
    assert ctx.facts["ab_tpot_ratio"] < 0.8
    assert ctx.facts["ab_verdict"] in ("pass", "inconclusive")
    readout = ctx.facts["readout"]
    assert readout.verdict in ("pass", "inconclusive"), readout.reasons
    # Enough steps pair both replicas (each finished requests in it) for every metric.
    assert int(LIVE_S / LIVE_STEP_S) >= 8
    for row in readout.metrics:
        assert row.result.n_used >= 6, (row.title, row.result)
    assert readout.variants_seen["r2"] == [tier_variant(ctx, "r2")]
    if ctx.facts["ab_verdict"] == readout.verdict:
        assert f"live readout: {readout.verdict.upper()} (the same verdict)" in text
    else:
        assert "(a DIFFERENT verdict, under the same rule; the rows that differ:)" in text
        assert "why they can differ:" in text
        ab_rows = ctx.facts["ab_rows"]
        for row in readout.metrics:
            other = ab_rows.get(row.key)
            if other is not None and other.result.verdict != row.result.verdict:
                assert f"{row.title}" in text.split("the rows that differ:)")[1]


def tier_variant(ctx: object, replica: str) -> str:
    from tierctl.spec import load_spec

    tier = resolve_tier(load_spec(ctx.workdir / "new.tier.yaml"))  # type: ignore[attr-defined]
    return tier.replicas[replica].variant


def test_the_ab_verdict_follows_the_readout_rule() -> None:
    from tierctl.bench.bootstrap import Ratio
    from tierctl.demo.canary import ab_judgement, ab_verdict
    from tierctl.readout.analysis import judge_canary
    from tierctl.readout.stats import ProportionResult

    def r(ratio: float, low: float, high: float) -> Ratio:
        return Ratio(1.0, ratio, ratio, low, high, 4)

    same = r(1.0, 0.95, 1.05)
    better_tpot = {"ttft_p50_s": same, "ttft_p95_s": same, "e2e_p50_s": same}
    assert ab_verdict({**better_tpot, "tpot_p50_s": r(0.5, 0.45, 0.6)}) == "pass"
    # The readout passes a canary whose guards are shown within the tolerance whatever its
    # TPOT does (its reasons say what improved); the A/B, judged by the same rule, too. (The
    # A/B's own rule, before, also wanted TPOT better and said "inconclusive" here: the two
    # verdicts of the demo disagreed by construction.)
    assert ab_verdict({**better_tpot, "tpot_p50_s": r(0.5, 0.3, 0.9)}) == "pass"
    worse_ttft = {**better_tpot, "ttft_p95_s": r(1.4, 1.2, 1.6), "tpot_p50_s": r(0.5, 0.45, 0.6)}
    assert ab_verdict(worse_ttft) == "fail"
    # A guard whose interval reaches past the tolerance is undecided, in both.
    wide = {**better_tpot, "ttft_p50_s": r(0.99, 0.66, 1.18)}
    verdict, reasons, rows = ab_judgement(wide)
    assert verdict == "inconclusive"
    assert reasons == ["guard metrics undecided: TTFT p50"]
    none = ProportionResult(0, 0, 0, 0, 0, 0, 0, 0, "no-data")
    assert judge_canary(rows, none) == (verdict, reasons)  # literally the readout's judge
    # The readout's TPOT rows read the engine's inter-token latency, so they pair with the
    # A/B's ITL columns; a better ITL p50 is named in the reasons.
    better_itl = {**better_tpot, "itl_p50_s": r(0.05, 0.04, 0.07), "itl_p90_s": same}
    verdict, reasons, rows = ab_judgement(better_itl)
    assert verdict == "pass"
    assert reasons == ["better on TPOT p50; no guard worse"]
    assert [row.key for row in rows] == ["ttft_p50", "ttft_p95", "tpot_p50", "tpot_p90", "e2e_p50"]
    # A block whose ITL p50 is 0 (tokens delivered together) is a value, not missing data.
    zero_gap = {**better_tpot, "itl_p50_s": r(0.02, 0.0, 0.04)}
    assert ab_judgement(zero_gap)[1] == ["better on TPOT p50; no guard worse"]
    # Throughput: higher is better, so a B/A above the band is better.
    tput = {**better_tpot, "output_tok_per_s": r(1.5, 1.4, 1.6)}
    assert ab_judgement(tput)[1] == ["better on generation tok/s; no guard worse"]


def test_a_disagreement_names_the_rows_and_why() -> None:
    from tierctl.bench.bootstrap import Ratio
    from tierctl.demo.canary import ab_judgement, compare_verdicts
    from tierctl.readout.analysis import MetricReadout, Readout
    from tierctl.readout.stats import PairedResult, ProportionResult

    def r(ratio: float, low: float, high: float) -> Ratio:
        return Ratio(1.0, ratio, ratio, low, high, 4)

    same = r(1.0, 0.97, 1.03)
    ab, _, rows = ab_judgement({"ttft_p50_s": same, "ttft_p95_s": same, "e2e_p50_s": same})
    assert ab == "pass"

    def row(key: str, title: str, low: float, high: float, verdict: str) -> MetricReadout:
        res = PairedResult(9, 9, 1.0, low, high, 1.0, 0.5, verdict)  # type: ignore[arg-type]
        return MetricReadout(key, title, True, 1.0, 1.0, res)

    none = ProportionResult(0, 0, 0, 0, 0, 0, 0, 0, "no-data")
    metrics = (
        row("ttft_p50", "TTFT p50", 0.95, 1.05, "same"),
        row("ttft_p95", "TTFT p95", 0.81, 1.23, "inconclusive"),
    )
    readout = Readout(
        None,
        None,
        0,
        1,
        15,
        "sglang_",
        metrics,
        none,
        {},
        "inconclusive",
        (),  # type: ignore[arg-type]
    )
    by_key = {x.key: x for x in rows}
    lines = compare_verdicts(ab, by_key, readout)
    assert lines[0].startswith("A/B: PASS; live readout: INCONCLUSIVE (a DIFFERENT verdict")
    assert lines[1] == (
        "  TTFT p95 (guard): A/B same 1.00 [0.97, 1.03], readout inconclusive 1.00 [0.81, 1.23]"
    )
    assert "TTFT p50" not in " ".join(lines)  # rows that agree are not listed
    # The row differs because the readout's interval is the wider one: the buckets are named.
    assert lines[2].startswith("  why they can differ: the readout's intervals are the wider")
    assert "over 9 paired steps" in lines[2]
    assert "A/B's intervals are the wider" not in lines[2]
    # The other way round (the A/B's wall-clock times noisier), the A/B's reason is given.
    wide_ab, _, rows2 = ab_judgement(
        {"ttft_p50_s": same, "ttft_p95_s": r(0.9, 0.57, 1.16), "e2e_p50_s": same}
    )
    assert wide_ab == "inconclusive"
    narrow = (
        row("ttft_p50", "TTFT p50", 0.97, 1.03, "same"),
        row("ttft_p95", "TTFT p95", 0.95, 1.02, "same"),
    )
    passed = Readout(None, None, 0, 1, 15, "sglang_", narrow, none, {}, "pass", ())  # type: ignore[arg-type]
    lines = compare_verdicts(wide_ab, {x.key: x for x in rows2}, passed)
    assert lines[1] == (
        "  TTFT p95 (guard): A/B inconclusive 0.90 [0.57, 1.16], readout same 1.00 [0.95, 1.02]"
    )
    assert lines[2].startswith("  why they can differ: the A/B's intervals are the wider")
    assert "over 4 paired blocks" in lines[2]
    agreed = Readout(None, None, 0, 1, 15, "sglang_", metrics, none, {}, "pass", ())  # type: ignore[arg-type]
    assert compare_verdicts(ab, by_key, agreed) == [
        "A/B: PASS; live readout: PASS (the same verdict)"
    ]


def test_quick_demo_with_a_cost_model_file_uses_it(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    from tierctl.sim.cost import GLM53_FLASH_W4AFP8_TP4_H200
    from tierctl.sim.costfile import write_cost_model

    model = tmp_path / "slow-decode.json"
    write_cost_model(
        model,
        dataclasses.replace(GLM53_FLASH_W4AFP8_TP4_H200, name="slow-decode", decode_base_s=0.1),
        {"fitted_on": ["by hand"]},
    )
    result = run_cli("demo", "--quick", "--cost-model", str(model))
    assert result.code == 0, result.err
    out = " ".join(result.out.split())
    assert "modelled with the slow-decode step costs" in out
    base = " ".join(run_cli("demo", "--quick").out.split())
    assert "modelled with the glm53-flash-w4afp8-tp4-h200 step costs" in base
    # A 100 ms decode step changes the what-if's figures.
    assert out.split("slow-decode step costs")[1][:400] != base.split("h200 step costs")[1][:400]


def test_demo_refuses_a_bad_cost_model_file_before_starting(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "tierctl-cost-model", "format": 1, "model": {"name": "x"}}')
    result = run_cli("demo", "--quick", "--cost-model", str(bad))
    assert result.code == 2
    assert "bad.json" in result.err
    assert "declare + render" not in result.out
    assert "Traceback" not in result.err
