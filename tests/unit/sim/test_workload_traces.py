"""Traces as simulator workloads: rows to requests, and the JSONL round trip.

The formats themselves are tested once, against the shared reader, in tests/unit/test_traces.py.
"""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.sim.workload import SimRequest, Workload, hammer, multi_turn_day
from tierctl.sim.workload_traces import read_workload, write_jsonl


def test_trace_rows_become_requests_with_block_hashes_and_offsets(tmp_path: Path) -> None:
    p = tmp_path / "mc.jsonl"
    p.write_text(
        '{"timestamp": 2000, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]}\n'
        '{"timestamp": 4500, "input_length": 1536, "output_length": 5, "hash_ids": [1, 2, 3]}\n'
    )
    wl = read_workload(p, "mooncake")
    assert wl.name == "mc"
    assert [(r.rid, r.arrival_s, r.input_tokens, r.output_tokens) for r in wl.requests] == [
        ("mc-0", 2.0, 1024, 10), ("mc-1", 4.5, 1536, 5)
    ]  # fmt: skip
    assert wl.requests[1].block_hashes == (1, 2, 3)
    assert wl.requests[1].block_tokens == 512


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_jsonl_round_trip(seed: int) -> None:
    import tempfile

    rng = random.Random(seed)
    wl = hammer(rng, rate_per_s=3.0, duration_s=5.0).merged(
        multi_turn_day(rng, hours=0.05, rate_per_h=200)
    )
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "w.jsonl"
        write_jsonl(wl, p)
        back = read_workload(p, "jsonl")
    assert back.requests == wl.requests


def test_multi_turn_day_caches_most_prompt_tokens() -> None:
    wl = multi_turn_day(random.Random(0), hours=4)
    seen: set[int] = set()
    total = cached = 0
    for r in wl.requests:
        n = 0
        for h in r.block_hashes:
            if h not in seen:
                break
            n += 1
        cached += min(n * r.block_tokens, r.input_tokens)
        total += r.input_tokens
        seen.update(r.block_hashes)
    assert 0.7 < cached / total < 0.9
    assert 500 < len(wl.requests) / 4 < 900
    assert all(10_000 <= r.input_tokens <= 720_000 for r in wl.requests)
    assert isinstance(wl, Workload)
    assert isinstance(wl.requests[0], SimRequest)
