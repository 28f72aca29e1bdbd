"""`make demo-real`'s INCONCLUSIVE verdict says what was undecided and what would decide it."""

from __future__ import annotations

import json
import sys

from tierctl.realtier.demo import _what_would_decide


def _readout_json(doc: dict[str, object]) -> list[str]:
    """A stand-in for `tierctl readout --format json`: a process printing ``doc``."""
    return [sys.executable, "-c", f"print({json.dumps(json.dumps(doc))})"]


def test_an_inconclusive_readout_names_the_undecided_metrics_and_the_longer_window() -> None:
    doc = {
        "verdict": "inconclusive",
        "reasons": ["guard metrics undecided: TTFT p50"],
        "metrics": [
            {"key": "ttft_p50", "title": "TTFT p50",
             "result": {"verdict": "inconclusive", "n_used": 5, "ci_low": 0.8, "ci_high": 1.4}},
            {"key": "tpot_p50", "title": "TPOT p50",
             "result": {"verdict": "better", "n_used": 6, "ci_low": 0.5, "ci_high": 0.7}},
        ],
    }  # fmt: skip
    lines = _what_would_decide(_readout_json(doc), live_s=60)
    assert lines[0] == "why: guard metrics undecided: TTFT p50"
    assert lines[1] == "  undecided: TTFT p50 over 5 paired steps, interval 0.80-1.40"
    assert not any("TPOT" in ln for ln in lines)
    assert "(it had 5 paired 10 s steps)" in lines[-1]
    assert "tierctl real-engine demo --live-s 180" in lines[-1]


def test_an_unreadable_readout_says_so() -> None:
    lines = _what_would_decide([sys.executable, "-c", "print('not json')"], live_s=60)
    assert lines == ["(the readout's JSON could not be read to say what is undecided)"]
