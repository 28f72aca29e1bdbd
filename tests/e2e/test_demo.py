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


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.xfail(
    reason="flaky (noted on issue 15): passed alone on a quiet machine (49 s) but failed inside "
    "the full suite in the final clean-clone run; not yet diagnosed",
    strict=False,
)
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
    assert on_loop.burst_completed == dyntok.burst_completed == 6
    text = console.export_text()
    assert "the router's own view, same load both passes" in text
    assert "HTTP health check failed" in text  # the router's own log, quoted


def test_the_ab_verdict_follows_the_readout_rule() -> None:
    from tierctl.bench.bootstrap import Ratio
    from tierctl.demo.canary import ab_verdict

    def r(ratio: float, low: float, high: float) -> Ratio:
        return Ratio(1.0, ratio, ratio, low, high, 4)

    same = r(1.0, 0.95, 1.05)
    better_tpot = {"ttft_p50_s": same, "ttft_p95_s": same, "e2e_p50_s": same}
    assert ab_verdict({**better_tpot, "tpot_p50_s": r(0.5, 0.45, 0.6)}) == "pass"
    assert ab_verdict({**better_tpot, "tpot_p50_s": r(0.5, 0.3, 0.9)}) == "inconclusive"
    worse_ttft = {**better_tpot, "ttft_p95_s": r(1.4, 1.2, 1.6), "tpot_p50_s": r(0.5, 0.45, 0.6)}
    assert ab_verdict(worse_ttft) == "fail"


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
