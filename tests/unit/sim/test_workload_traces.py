"""Trace readers: tierctl JSONL, Mooncake JSONL and Azure CSV."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.errors import InputError
from tierctl.sim.workload import SimRequest, Workload, hammer, multi_turn_day
from tierctl.sim.workload_traces import read_trace, write_jsonl


def test_mooncake_lines_become_requests_with_block_hashes(tmp_path: Path) -> None:
    p = tmp_path / "mc.jsonl"
    p.write_text(
        '{"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]}\n'
        '{"timestamp": 2500, "input_length": 1536, "output_length": 5, "hash_ids": [1, 2, 3]}\n'
    )
    wl = read_trace(p, "mooncake")
    assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in wl.requests] == [
        (0.0, 1024, 10), (2.5, 1536, 5)
    ]  # fmt: skip
    assert wl.requests[1].block_hashes == (1, 2, 3)


def test_azure_csv_arrivals_are_relative_to_the_first_row(tmp_path: Path) -> None:
    p = tmp_path / "az.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.1805900,396,109\n"
    )
    wl = read_trace(p, "azure")
    assert [r.input_tokens for r in wl.requests] == [374, 396]
    assert wl.requests[1].arrival_s == pytest.approx(3.5)


@pytest.mark.parametrize(
    ("fmt", "text", "needle"),
    [
        ("jsonl", '{"arrival_s": 0, "input_tokens": 5, "output_tokens": 1}\nnot json\n', ":2"),
        ("jsonl", '{"arrival_s": "soon", "input_tokens": 5, "output_tokens": 1}\n', "arrival_s"),
        ("mooncake", '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": "x"}\n', "hash_ids"),
        ("azure", "a,b\n1,2\n", "TIMESTAMP"),
        ("jsonl", "", "no requests"),
    ],
)  # fmt: skip
def test_malformed_traces_are_located_input_errors(
    tmp_path: Path, fmt: str, text: str, needle: str
) -> None:
    p = tmp_path / "t.txt"
    p.write_text(text)
    with pytest.raises(InputError) as exc:
        read_trace(p, fmt)
    assert needle in exc.value.format()
    assert str(p) in exc.value.format()


def test_missing_trace_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read trace"):
        read_trace(tmp_path / "nope.jsonl")


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
        back = read_trace(p, "jsonl")
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
