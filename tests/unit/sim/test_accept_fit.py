"""Speculative decoding's acceptance fitted from the engines' own counters (sim.accept_fit).

The metric text is shaped as each engine exports it (names from the profiles; vLLM's counters
labelled ``engine, model_name`` with ``position`` on the per-position one and prometheus_client's
``_created`` samples beside them; SGLang's gauges labelled per rank).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.errors import InputError
from tierctl.runtime.process import free_port
from tierctl.sim.accept_fit import chain_rate, fit_acceptance
from tierctl.sim.config import EngineConfig
from tierctl.sim.costfile import read_cost_model
from tierctl.sim.engine import Scheduler

from .helpers import FLAT

NGRAM = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'


def vllm_text(drafts: float, per_pos: list[float], *, created: float = 1.7e9) -> str:
    lab = 'engine="0",model_name="tiny"'
    lines = [
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{lab}}} {drafts}",
        f"vllm:spec_decode_num_drafts_created{{{lab}}} {created}",
        "# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.",
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {drafts * len(per_pos)}",
        "# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.",
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {sum(per_pos)}",
        "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft "
        "position.",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
    ]
    for k, a in enumerate(per_pos):
        lines.append(
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{k}"}} {a}'
        )
        lines.append(
            f'vllm:spec_decode_num_accepted_tokens_per_pos_created{{{lab},position="{k}"}} 1.7e9'
        )
    lines.append(f"vllm:num_preemptions_total{{{lab}}} 0.0")
    return "\n".join(lines) + "\n"


def sglang_text(lengths: list[float]) -> str:
    lines = [
        "# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.",
        "# TYPE sglang:spec_accept_length gauge",
    ]
    for rank, v in enumerate(lengths):
        lab = f'engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="{rank}"'
        lines.append(f"sglang:spec_accept_length{{{lab}}} {v}")
    return "\n".join(lines) + "\n"


def test_vllm_per_position_counters_give_the_whole_distribution() -> None:
    fit = fit_acceptance(vllm_text(1000, [800, 500, 300]), "vllm", draft_steps=3)
    assert fit.by_position == pytest.approx((0.8, 0.625, 0.6))
    assert fit.distribution == pytest.approx((0.2, 0.3, 0.2, 0.3))
    assert fit.mean_length == pytest.approx(2.6)
    r = fit.rate
    assert 1 + r + r**2 + r**3 == pytest.approx(2.6, abs=1e-9)
    assert fit.counters["drafts"] == 1000  # the _created samples are not summed in


def test_a_baseline_dump_is_subtracted() -> None:
    before = vllm_text(500, [450, 400, 350])
    after = vllm_text(1500, [1250, 900, 650])
    fit = fit_acceptance(after, "vllm", draft_steps=3, baseline=before)
    assert fit.by_position == pytest.approx((0.8, 0.625, 0.6))


def test_sglang_has_only_a_mean_so_one_chain_rate_is_solved_for_the_draft_steps() -> None:
    fit = fit_acceptance(sglang_text([2.4, 2.6]), "sglang", draft_steps=3)
    assert fit.by_position == ()
    assert fit.mean_length == pytest.approx(2.5)
    r = fit.rate
    assert 1 + r + r**2 + r**3 == pytest.approx(2.5, abs=1e-9)
    assert "assumed" in fit.method


@pytest.mark.parametrize(("engine", "text"), [("vllm", vllm_text(0, [])), ("sglang", "x 1\n")])
def test_no_counters_is_refused_naming_them(engine: str, text: str) -> None:
    with pytest.raises(InputError) as caught:
        fit_acceptance(text, engine, draft_steps=3, source="m.txt")
    assert "spec" in (caught.value.rule or "")


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 10**6),
    st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=8),
)
def test_the_fit_reproduces_the_counters_mean_and_is_a_distribution(
    drafts: int, fractions: list[float]
) -> None:
    # Counters of one chain: each position accepted at most as often as the one before it.
    per_pos, last = [], float(drafts)
    for f in fractions:
        last = round(last * f)
        per_pos.append(float(last))
    fit = fit_acceptance(vllm_text(drafts, per_pos), "vllm", draft_steps=len(per_pos))
    assert all(0.0 <= c <= 1.0 for c in fit.by_position)
    assert sum(fit.distribution) == pytest.approx(1.0)
    assert all(p >= -1e-12 for p in fit.distribution)
    mean = 1 + sum(per_pos) / drafts
    assert fit.mean_length == pytest.approx(mean)
    survive, implied = 1.0, 1.0
    for c in fit.by_position:
        survive *= c
        implied += survive
    assert implied == pytest.approx(mean)
    r = chain_rate(mean, len(per_pos))
    assert sum(r**j for j in range(len(per_pos) + 1)) == pytest.approx(mean, abs=1e-6)


def test_the_simulator_draws_the_fitted_positions() -> None:
    fit = fit_acceptance(vllm_text(1000, [800, 500, 300]), "vllm", draft_steps=3)
    cost = FLAT.__class__(
        **{
            **FLAT.__dict__,
            "spec_accept_rate": fit.rate,
            "spec_accept_by_position": fit.by_position,
        }
    )
    cfg = EngineConfig.from_argv(["vllm", "serve", "m", "--speculative-config", NGRAM])
    sched = Scheduler(cfg, cost, seed=3)
    draws = [sched._tokens_this_round(100) for _ in range(20_000)]
    counts = [draws.count(k) / len(draws) for k in (1, 2, 3, 4)]
    assert counts == pytest.approx(list(fit.distribution), abs=0.015)


def _fit_cli(run_cli: Callable[..., Any], tmp_path: Path, source: str) -> dict[str, Any]:
    out = tmp_path / "m.json"
    res = run_cli(
        "sim", "fit", source, "--preset", "dense-8b-h100", "--output", str(out), "--force",
        "--", "vllm", "serve", "tiny", "--speculative-config", NGRAM,
    )  # fmt: skip
    assert res.code == 0, res.err
    assert "tokens per verify round" in res.out
    model, prov = read_cost_model(out)
    assert model.spec_accept_by_position == pytest.approx((0.8, 0.625, 0.6))
    assert model.prefill_per_token_s == pytest.approx(2.7e-5)  # the base's step terms kept
    doc = json.loads(out.read_text())
    assert doc["model"]["spec_accept_by_position"] == pytest.approx([0.8, 0.625, 0.6])
    return prov


def test_sim_fit_writes_the_acceptance_into_the_cost_file(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    dump = tmp_path / "metrics.txt"
    dump.write_text(vllm_text(1000, [800, 500, 300]))
    prov = _fit_cli(run_cli, tmp_path, str(dump))  # --from auto recognises a /metrics dump
    assert prov["acceptance"]["distribution"] == pytest.approx([0.2, 0.3, 0.2, 0.3])


@pytest.fixture
def metrics_url() -> Iterator[str]:
    body = vllm_text(1000, [800, 500, 300]).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_sim_fit_reads_a_live_metrics_url(
    run_cli: Callable[..., Any], tmp_path: Path, metrics_url: str
) -> None:
    prov = _fit_cli(run_cli, tmp_path, f"{metrics_url}/metrics")
    assert prov["fitted_on"] == [f"{metrics_url}/metrics"]
    bad = run_cli(
        "sim", "fit", f"{metrics_url}/nope", "--", "vllm", "serve", "tiny",
        "--speculative-config", NGRAM,
    )  # fmt: skip
    assert bad.code == 2
    assert "HTTP 404" in bad.err
    assert "Traceback" not in bad.err


def test_a_cost_file_with_bad_acceptance_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps(
            {"kind": "tierctl-cost-model", "format": 1,
             "model": {"base": "dense-8b-h100", "spec_accept_by_position": [0.5, 1.5]}}
        )
    )  # fmt: skip
    with pytest.raises(InputError) as caught:
        read_cost_model(path)
    assert caught.value.location is not None
    assert caught.value.location.path == "model.spec_accept_by_position"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_simulated_engines_counters_fit_back_to_its_acceptance(engine: str) -> None:
    """A round trip: the simulator draws acceptance from a model, its engine's /metrics count
    it as that engine does, and the fit reads the model back from them."""
    from tierctl.sim.metrics import metrics_for
    from tierctl.sim.workload import SimRequest

    truth = (0.9, 0.5, 0.2)
    cost = FLAT.__class__(
        **{**FLAT.__dict__, "spec_accept_rate": 0.5, "spec_accept_by_position": truth}
    )
    if engine == "vllm":
        argv = ["vllm", "serve", "m", "--speculative-config", NGRAM]
        kw: dict[str, Any] = {"cache_info": {"block_size": "16"}}
    else:
        argv = ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3"]
        kw = {}
    cfg = EngineConfig.from_argv(argv)
    sched = Scheduler(cfg, cost, seed=5)
    for i in range(8):
        sched.submit(SimRequest(f"r{i}", 0.0, 100, 2_000), 0.0)
    now = 0.0
    while sched.busy:
        rnd = sched.step(now)
        assert rnd is not None
        now += rnd.duration_s
    metrics = metrics_for(engine, "m", **kw)
    metrics.set_spec(sched.stats.spec_drafts, sched.stats.spec_accepted_by_position)
    fit = fit_acceptance(metrics.render().decode(), engine, draft_steps=3)
    mean = 1 + 0.9 + 0.9 * 0.5 + 0.9 * 0.5 * 0.2
    assert fit.mean_length == pytest.approx(mean, rel=0.02)
    if engine == "vllm":
        assert fit.by_position == pytest.approx(truth, abs=0.03)
