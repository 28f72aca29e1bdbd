"""Acceptance fitted from a real vLLM's speculative decoding counters (CPU, the tiny Llama,
ngram speculation).

One engine with ``--speculative-config`` ngram (3 draft tokens); prompts that repeat a phrase,
so the prompt-lookup drafter finds matches. What is pinned: the engine exports the counters the
vLLM profile names (``/metrics``, read live through ``sim fit``), the per-position counters
agree with the engine's own accepted-token total (their sum, the reading the fit relies on:
position ``k``'s count is the rounds that accepted more than ``k`` drafts), and the fitted cost
file's acceptance is the counters' distribution.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.realengine.fixtures import extra_engine
from tierctl.engines import profile_for
from tierctl.runtime.promtext import metric_total, parse_metrics
from tierctl.sim.accept_fit import fit_acceptance
from tierctl.sim.costfile import read_cost_model

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]

NGRAM = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
FLAGS = ("--max-num-seqs", "4", "--speculative-config", NGRAM)


@pytest.fixture(scope="module")
def ngram_engine(
    vllm_python: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    log = tmp_path_factory.mktemp("vllm-ngram") / "engine.log"
    with extra_engine(vllm_python, tiny_model, log, FLAGS, "ngram") as engine:
        yield engine


def _serve_some(url: str) -> None:
    from tierctl.realengine.engine import SERVED_NAME

    with httpx.Client(timeout=300) as client:
        for i in range(6):
            prompt = " ".join(["alpha beta gamma delta"] * 30) + f" {i}"
            body = {"model": SERVED_NAME, "prompt": prompt, "max_tokens": 48,
                    "temperature": 0, "ignore_eos": True}  # fmt: skip
            answer = client.post(f"{url}/v1/completions", json=body)
            assert answer.status_code == 200, answer.text


def test_sim_fit_reads_the_real_engines_counters(
    ngram_engine: Any, run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    before = httpx.get(f"{ngram_engine.url}/metrics", timeout=30).text
    _serve_some(ngram_engine.url)
    after = httpx.get(f"{ngram_engine.url}/metrics", timeout=30).text
    prof = profile_for("vllm")
    ex = prof.metrics.extra
    samples = parse_metrics(after)
    drafts = metric_total(samples, prof.prefix + ex["spec_drafts"])
    accepted = metric_total(samples, prof.prefix + ex["spec_accepted_tokens"])
    assert drafts
    assert accepted is not None
    fit = fit_acceptance(after, "vllm", draft_steps=3, baseline=before)
    assert len(fit.by_position) == 3
    # The engine's own total equals the per-position counters' sum: P(accepted > k) reading.
    base = parse_metrics(before)
    d = drafts - (metric_total(base, prof.prefix + ex["spec_drafts"]) or 0.0)
    a = accepted - (metric_total(base, prof.prefix + ex["spec_accepted_tokens"]) or 0.0)
    assert fit.mean_length == pytest.approx(1 + a / d)
    assert sum(fit.distribution) == pytest.approx(1.0)
    # sim fit, from the live endpoint, writes it into the cost file.
    before_file = tmp_path / "before.txt"
    before_file.write_text(before)
    out = tmp_path / "m.json"
    res = run_cli(
        "sim", "fit", f"{ngram_engine.url}/metrics", "--acceptance-baseline", str(before_file),
        "--preset", "dense-8b-h100", "--output", str(out), "--",
        "vllm", "serve", "tiny-llama", "--speculative-config", NGRAM,
    )  # fmt: skip
    assert res.code == 0, res.err
    model, prov = read_cost_model(out)
    assert model.spec_accept_by_position == pytest.approx(fit.by_position)
    assert json.loads(out.read_text())["provenance"]["acceptance"]["engine"] == "vllm"
    assert prov["acceptance"]["counters"]["drafts"] >= d
