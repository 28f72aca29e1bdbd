"""Reproducers of the sweep's open hangs of seed 5150301 (issue #22), fixed in session 9.

- input 7965 (results): a bench results file with one request sent at 1e308 s made ``sim fit
  --from bench`` run past any budget: the decode fast-forward solved for the rounds before that
  far arrival, and at ~1e160 rounds adding one no longer changed a float (an endless nudge);
- input 10624 (cli): ``sim serve --port 0 --time-scale nan`` served for ever: after the engine
  argv began, ``--time-scale nan`` was kept as an engine flag and never refused or applied.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.unit.sim.helpers import FLAT, cfg, cpu_budget
from tierctl.sim.engine import Scheduler
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

RunCli = Callable[..., CliResult]


@pytest.mark.parametrize("horizon", [1e308, 1e200, 1e30, 12.0])
def test_a_far_horizon_fast_forwards_to_the_first_finish(horizon: float) -> None:
    """The rounds before a far arrival end at the first finish, found at once."""
    cost = FLAT.__class__(**{**FLAT.__dict__, "decode_per_ctx_token_s": 1e-7})
    sched = Scheduler(cfg("--max-total-tokens", "20000"), cost)
    now = 0.0
    for i, out in enumerate((40, 90)):
        sched.submit(SimRequest(f"r{i}", 0.0, 100, out), now)
    while not sched.decode_only(now):  # the prefill first
        rnd = sched.step(now)
        assert rnd is not None
        now += rnd.duration_s
    with cpu_budget(5.0):
        end, rounds = sched.fast_forward(now, horizon)
    assert rounds == 40 - 1  # to r0's last token (its prefill gave it the first)
    assert end < horizon


def test_a_request_sent_at_1e308_is_simulated_in_bounded_time() -> None:
    reqs = [SimRequest(f"r{i}", t, 200, 32) for i, t in enumerate((0.0, 0.5, 1.0))]
    reqs.append(SimRequest("far", 1e308, 200, 32))
    with cpu_budget(10.0):
        result = simulate(cfg(), Workload.of("far", reqs), FLAT, fast_forward=True)
    assert [r.status for r in result.requests].count("completed") == 4


@pytest.mark.parametrize(
    "argv",
    [
        ("--port", "0", "--time-scale", "nan"),
        ("--port", "0", "--time-scale=2"),
        ("--host", "127.0.0.1", "--preset", "dense-8b-h100"),
        ("vllm", "serve", "m", "--port", "0", "--cost-model", "x.json"),
    ],
)
def test_a_tierctl_option_after_the_engine_argv_is_refused(
    run_cli: RunCli, argv: tuple[str, ...]
) -> None:
    result = run_cli("sim", "serve", *argv)
    assert result.code == 2, result.err
    assert "tierctl's own option and goes before the engine argv" in result.err
    assert "Traceback" not in result.err


# -- the fresh seed 2026120209 (`--generator all`, session 9) ---------------------------------


def _vllm_line(i: int, ctx_reqs: int, ctx_tok: int | str, gen: int, ms: str) -> str:
    return (
        f"(APIServer pid=1) INFO 12-01 09:21:35 [loggers.py:199] Engine 000: Iteration({i}): "
        f"{ctx_reqs} context requests, {ctx_tok} context tokens, {gen} generation requests, "
        f"{gen} generation tokens, iteration elapsed time: {ms} ms, CPU KV cache usage: 3.0%"
    )


@pytest.mark.parametrize(("tokens", "ms"), [("9" * 200, "12.50"), ("512", "9" * 400)])
def test_an_iteration_line_no_engine_logs_is_refused_with_its_number(
    tmp_path: Path, run_cli: RunCli, tokens: str, ms: str
) -> None:
    """Inputs 1013, 7235, 12998: a 200-digit token count raised OverflowError in the fit's
    design matrix; a 400-digit elapsed time is inf."""
    lines = [_vllm_line(i, 1, 512, 0, "20.00") for i in range(1, 5)]
    lines += [_vllm_line(i, 0, 0, 2, "4.00") for i in range(5, 9)]
    lines.insert(2, _vllm_line(99, 1, tokens, 0, ms))
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines) + "\n")
    result = run_cli("sim", "fit", str(log), "--from", "vllm-log", "--format", "json")
    assert result.code == 2, result.err
    assert "iteration line 3 logs a step no engine runs" in result.err
    assert "Traceback" not in result.err


def test_a_fleet_named_by_a_url_with_a_password_is_refused_masked(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """Input 43589: ``fleet plan --json`` echoed the fleet's name, a URL with a password."""
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "fleet: 'http://admin:hunter2pw@127.0.0.1:1/v1'\nold: v1\nnew: v2\nhosts:\n"
        "- {name: gpu01, file: gpu01/compose.yaml, agent_url: 'http://127.0.0.1:1'}\n"
    )
    for argv in (
        (
            "--format",
            "json",
        ),
        (),
    ):
        result = run_cli("fleet", "plan", str(path), *argv)
        assert result.code == 2, result.err
        assert "hunter2pw" not in result.out + result.err
        assert "a fleet's name is a name" in result.err


def test_volumes_that_are_no_list_are_left_out_of_the_pod(tmp_path: Path, run_cli: RunCli) -> None:
    """Input 18407: ``volumes: 99...9`` in an engine's compose fragment raised TypeError in
    the Kubernetes renderer (validate names it TC007; the compose render kept it)."""
    from tests.unit.test_hostile_sweep_5150301 import EXAMPLE

    text = EXAMPLE.read_text()
    mounts = "    volumes:\n      - /models:/models:ro\n"
    assert mounts in text
    spec = tmp_path / "tier.yaml"
    spec.write_text(text.replace(mounts, "    volumes: 12345\n", 1))
    result = run_cli("kube", "plan", str(spec), str(spec))
    assert result.code in (0, 1), result.err
    assert "Traceback" not in result.err
    result = run_cli("render", str(spec), "--target", "kubernetes", "-o", str(tmp_path / "k"))
    assert "Traceback" not in result.err
    assert "not a list" in result.out + result.err


def test_the_leak_check_reads_only_what_its_own_run_wrote(tmp_path: Path) -> None:
    """An earlier input's file (``import -o`` to a path that is the secret URL) was blamed on
    every later run that checked the folder: 37 false leaks in one run."""
    import tests.sweep_fuzz as sweep

    old = tmp_path / "old.yaml"
    old.write_text(f"output: {sweep.SWEEP_SECRET}\n")
    import os

    os.utime(old, ns=(1, 1))
    assert sweep._no_leak(lambda: (0, "", ""), tmp_path)() == (0, "", "")

    def writes() -> tuple[int, str, str]:
        (tmp_path / "new.txt").write_text(sweep.SWEEP_SECRET)
        return 0, "", ""

    with pytest.raises(sweep.SecretLeak):
        sweep._no_leak(writes, tmp_path)()
