"""Reproducers of the sweep's open hangs of seed 5150301 (issue #22), fixed in session 9.

- input 7965 (results): a bench results file with one request sent at 1e308 s made ``sim fit
  --from bench`` run past any budget: the decode fast-forward solved for the rounds before that
  far arrival, and at ~1e160 rounds adding one no longer changed a float (an endless nudge);
- input 10624 (cli): ``sim serve --port 0 --time-scale nan`` served for ever: after the engine
  argv began, ``--time-scale nan`` was kept as an engine flag and never refused or applied.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator

import pytest

from tests.conftest import CliResult
from tests.unit.sim.helpers import FLAT, cfg
from tierctl.sim.engine import Scheduler
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

RunCli = Callable[..., CliResult]


@contextlib.contextmanager
def _cpu_budget(seconds: float) -> Iterator[None]:
    """Fail (not hang) when the block runs past ``seconds`` of CPU: the old code never ended."""

    def expired(signum: int, frame: object) -> None:
        raise AssertionError(f"still running after {seconds} s of CPU")

    old = signal.signal(signal.SIGVTALRM, expired)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)


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
    with _cpu_budget(5.0):
        end, rounds = sched.fast_forward(now, horizon)
    assert rounds == 40 - 1  # to r0's last token (its prefill gave it the first)
    assert end < horizon


def test_a_request_sent_at_1e308_is_simulated_in_bounded_time() -> None:
    reqs = [SimRequest(f"r{i}", t, 200, 32) for i, t in enumerate((0.0, 0.5, 1.0))]
    reqs.append(SimRequest("far", 1e308, 200, 32))
    with _cpu_budget(10.0):
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
