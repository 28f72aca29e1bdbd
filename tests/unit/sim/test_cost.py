"""The cost model presets and `sim fit`."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tierctl.errors import InputError
from tierctl.sim.cost import GLM53_FLASH_W4AFP8_TP4_H200, PrefillSample, fit, preset
from tierctl.sim.engine import Round
from tierctl.sim.simulate import simulate
from tierctl.sim.steplog import fit_file, write_steps
from tierctl.sim.workload import burst, decoders, hammer

from .helpers import cfg


def test_glm_preset_prefills_720k_in_about_a_minute_plus() -> None:
    m = GLM53_FLASH_W4AFP8_TP4_H200
    chunks = [(16384, p) for p in range(0, 720_000, 16384)]
    total = sum(m.prefill_s([c]) for c in chunks)
    assert 60 < total < 150


def test_public_measurement_ordering_8x256k() -> None:
    rates, ttfts = [], []
    for n in (0, 4, 8):
        res = simulate(
            cfg("--chunked-prefill-size", "8192", "--max-running-requests", "8",
                "--prefill-decode-interval", str(n)),
            burst(random.Random(0), count=8, input_tokens=256_000, output_tokens=256, jitter=0,
                  spread_s=0),
        )  # fmt: skip
        done = res.requests
        rates.append(sum((r.output_tokens - 1) / (r.e2e_s - r.ttft_s) for r in done) / len(done))  # type: ignore[operator]
        ttfts.append(sum(r.ttft_s for r in done) / len(done))  # type: ignore[misc]
    assert rates[0] < rates[1] < rates[2]
    assert ttfts[0] < ttfts[1] < ttfts[2]


def test_fit_recovers_the_coefficients_of_simulated_steps(tmp_path: Path) -> None:
    rng = random.Random(1)
    wl = (
        decoders(count=4, output_tokens=400)
        .merged(burst(rng, count=4, input_tokens=60_000, output_tokens=50))
        .merged(hammer(rng, rate_per_s=1.0, duration_s=60))
    )
    steps: list[Round] = []
    simulate(cfg("--chunked-prefill-size", "4096", "--prefill-decode-interval", "1"), wl,
             steps=steps)  # fmt: skip
    path = tmp_path / "steps.jsonl"
    write_steps(steps, path)
    got = fit_file(path)
    want = GLM53_FLASH_W4AFP8_TP4_H200
    for f in ("prefill_per_token_s", "prefill_attn_pair_s", "decode_base_s",
              "decode_per_seq_s", "decode_per_ctx_token_s"):  # fmt: skip
        assert getattr(got, f) == pytest.approx(getattr(want, f), rel=0.02), f


def test_fit_needs_enough_samples() -> None:
    with pytest.raises(InputError, match="not enough step samples"):
        fit([PrefillSample(((10, 0),), 0.1)], [])


def test_malformed_step_log_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(
        '{"kind": "decode", "batch_size": 1, "context_tokens": 5, "duration_s": 0.1}\n{"kind": "decode"}\n'
    )
    with pytest.raises(InputError) as exc:
        fit_file(p)
    assert f"{p}:2" in exc.value.format()


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(InputError) as exc:
        preset("h100-magic")
    assert "dense-8b-h100" in exc.value.format()


def _pr40443_cell(interval: int) -> tuple[float, float]:
    """(median in-burst decode tok/s, mean TTFT s) of 8 x 256K, 512 out, chunk 8192, max 8."""
    import statistics

    res = simulate(
        cfg("--chunked-prefill-size", "8192", "--max-running-requests", "8",
            "--prefill-decode-interval", str(interval)),
        burst(random.Random(0), count=8, input_tokens=256_000, output_tokens=512, jitter=0,
              spread_s=0),
    )  # fmt: skip
    rates = [1 / r.burst_itl_mean_s for r in res.requests if r.burst_itl_mean_s]
    return statistics.median(rates), statistics.mean(r.ttft_s or 0.0 for r in res.requests)


def test_glm_preset_reproduces_the_public_interval_measurement_shape() -> None:
    # sglang PR #40443: interval 4/8 vs 0 speeds decode up >= 10x at <= 10 % TTFT cost.
    (r0, t0), (r4, t4), (r8, t8) = (_pr40443_cell(n) for n in (0, 4, 8))
    assert r4 >= 10 * r0
    assert r8 >= 10 * r0
    assert r8 > r4
    assert 1.0 < t4 / t0 <= 1.10
    assert 1.0 < t8 / t0 <= 1.10
    assert 80 < t0 < 115  # measured 96.7 s


def test_glm_preset_keeps_the_field_report_ratios() -> None:
    from tierctl.sim.workload import generate

    pdi1 = simulate(cfg("--chunked-prefill-size", "16384", "--prefill-decode-interval", "1"),
                    generate("field", seed=0))  # fmt: skip
    pdi2 = simulate(cfg("--chunked-prefill-size", "16384", "--prefill-decode-interval", "2"),
                    generate("field", seed=0))  # fmt: skip
    dec1, dec2 = pdi1.subset("dec"), pdi2.subset("dec")
    assert dec1.tpot_p50_s is not None
    assert dec2.tpot_p50_s is not None
    assert 0.53 <= dec2.tpot_p50_s / dec1.tpot_p50_s <= 0.72
    assert pdi1.summary.ttft_p50_s is not None
    assert pdi2.summary.ttft_p50_s is not None
    assert pdi2.summary.ttft_p50_s / pdi1.summary.ttft_p50_s <= 1.02
