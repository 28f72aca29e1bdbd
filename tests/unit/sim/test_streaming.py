"""The streamed trace path of ``sim run`` (tierctl.sim.streaming): the same summary as the
in-memory path, exact percentiles up to the cap and bounded ones past it, a fallback for what
it cannot stream, and memory that does not hold the requests."""

from __future__ import annotations

import json
import math
import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tierctl.errors import InputError
from tierctl.sim.config import EngineConfig
from tierctl.sim.simulate import simulate
from tierctl.sim.streaming import HIST_RELATIVE, Quantiles, simulate_trace_stream
from tierctl.sim.workload_traces import read_workload

PRESET = "glm53-flash-w4afp8-tp4-h200"


def _mooncake(path: Path, rows: int, seed: int = 3, *, shuffle: bool = False) -> Path:
    rng = random.Random(seed)
    prefixes = [[rng.randrange(1 << 30) for _ in range(4)] for _ in range(5)]
    t = 0
    lines = []
    for i in range(rows):
        t += rng.randrange(0, 900)
        blocks = rng.randint(1, 6)
        shared = prefixes[rng.randrange(5)][: rng.randint(0, min(4, blocks))]
        tail = [(1 << 31) + i * 8 + k for k in range(blocks - len(shared))]
        # Some prompts are too long for the pool: refused requests are counted by reason.
        length = 10_000_000 if i % 37 == 5 else blocks * 512 - rng.randrange(200)
        row = {"timestamp": t, "input_length": length, "output_length": rng.randint(1, 60)}
        lines.append(json.dumps({**row, "hash_ids": shared + tail}))
    if shuffle:
        rng.shuffle(lines)
    path.write_text("\n".join(lines) + "\n")
    return path


def _both(path: Path, fmt: str, argv: tuple[str, ...] = ()) -> tuple[object, object]:
    config = EngineConfig.from_argv(list(argv))
    streamed = simulate_trace_stream(config, path, fmt, PRESET)
    assert streamed is not None
    memory = simulate(config, read_workload(path, fmt), PRESET)
    return streamed, memory


@pytest.mark.parametrize("argv", [(), ("--chunked-prefill-size", "2048")])
def test_streamed_summary_equals_the_in_memory_one(tmp_path: Path, argv: tuple[str, ...]) -> None:
    path = _mooncake(tmp_path / "t.jsonl", 400)
    (result, reasons, exact), memory = _both(path, "mooncake", argv)  # type: ignore[misc]
    assert exact
    assert result.requests == ()
    s, m = result.summary, memory.summary  # type: ignore[attr-defined]
    for name in s.__dataclass_fields__:
        a, b = getattr(s, name), getattr(m, name)
        if isinstance(a, float) and isinstance(b, float):
            assert a == pytest.approx(b, rel=1e-12, abs=1e-15), name
        else:
            assert a == b, name
    for name in ("rounds", "prefill_rounds", "deferred_rounds", "sim_end_s", "stopped"):
        assert getattr(result, name) == getattr(memory, name), name
    from tierctl.sim.result import not_completed

    assert reasons == not_completed(memory.requests)  # type: ignore[attr-defined]
    assert sum(reasons.values()) > 0  # the refused prompts are there


def test_azure_wall_clock_arrivals_are_made_relative_to_the_first_row(tmp_path: Path) -> None:
    rows = "".join(
        f"2023-11-16 18:{15 + k // 60:02d}:{k % 60:02d}.0000000,{300 + 7 * k},{5 + k % 9}\n"
        for k in range(80)
    )
    path = tmp_path / "a.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows)
    (result, _, _), memory = _both(path, "azure")  # type: ignore[misc]
    assert result.summary == memory.summary  # type: ignore[attr-defined]
    assert result.sim_end_s == memory.sim_end_s  # type: ignore[attr-defined]


def test_an_unsorted_trace_is_left_to_the_in_memory_path(tmp_path: Path) -> None:
    path = _mooncake(tmp_path / "t.jsonl", 60, shuffle=True)
    assert simulate_trace_stream(EngineConfig.from_argv([]), path, "mooncake", PRESET) is None


def test_an_empty_trace_is_refused_as_the_reader_refuses_it(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text("\n")
    with pytest.raises(InputError, match="no rows"):
        simulate_trace_stream(EngineConfig.from_argv([]), path, "jsonl", PRESET)


def test_the_cli_prints_the_same_summary_either_way(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    path = _mooncake(tmp_path / "t.jsonl", 120)
    args = ("sim", "run", "--trace", str(path), "--trace-format", "mooncake")
    streamed = run_cli(*args)
    memory = run_cli(*args, "--per-request")
    assert streamed.code == memory.code == 0, (streamed.err, memory.err)
    head = memory.out.splitlines()[:8]
    assert streamed.out.splitlines()[:8] == head
    assert "did not complete" in streamed.out  # the not-completed line, from the counts
    reason = [x for x in streamed.out.splitlines() if "did not complete" in x]
    assert reason == [x for x in memory.out.splitlines() if "did not complete" in x]


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.lists(
        st.one_of(st.just(0.0), st.floats(1e-6, 1e4, allow_nan=False)), min_size=1, max_size=120
    ),
    st.sampled_from([50, 90, 95, 99]),
)
def test_a_folded_series_stays_within_its_bucket_of_the_order_statistics(
    values: list[float], q: int
) -> None:
    exact, folded = Quantiles(), Quantiles(cap=8)
    for v in values:
        exact.add(v)
        folded.add(v)
    assert exact.exact
    assert exact.percentile(q) == pytest.approx(float(np.percentile(values, q)))
    got = folded.percentile(q)
    assert got is not None
    if len(values) >= 8:
        assert not folded.exact
    ordered = sorted(values)
    rank = q / 100 * (len(values) - 1)
    lo, hi = ordered[math.floor(rank)], ordered[math.ceil(rank)]
    assert lo * (1 - HIST_RELATIVE) - 1e-12 <= got <= hi * (1 + HIST_RELATIVE) + 1e-12


def test_streaming_does_not_hold_the_requests(tmp_path: Path) -> None:
    """Traced allocations as the trace grows 4x: the in-memory path holds every request
    (workload, scheduler, results); the streamed one grows by its 24 bytes a request of
    percentiles and nothing else."""
    config = EngineConfig.from_argv([])

    def peaks(rows: int) -> tuple[int, int]:
        path = _mooncake(tmp_path / f"t{rows}.jsonl", rows)
        tracemalloc.start()
        try:
            simulate(config, read_workload(path, "mooncake"), PRESET)
            held = tracemalloc.get_traced_memory()[1]
            tracemalloc.reset_peak()
            simulate_trace_stream(config, path, "mooncake", PRESET)
            streamed = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        return held, streamed

    peaks(200)  # caches and first imports out of the way
    held_1, streamed_1 = peaks(1000)
    held_4, streamed_4 = peaks(4000)
    assert (streamed_4 - streamed_1) * 4 < held_4 - held_1, (streamed_1, streamed_4, held_1, held_4)


def test_the_stream_buffers_only_the_next_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows pulled from the file and not yet submitted stay a handful whatever the trace's
    length (a `len()` that pulled one more row per call once buffered the whole trace)."""
    from tierctl.sim import streaming

    most = [0]

    class Watched(streaming._Lazy):
        def _fill(self, i: int) -> None:
            super()._fill(i)
            most[0] = max(most[0], len(self.buffer))

    monkeypatch.setattr(streaming, "_Lazy", Watched)
    path = _mooncake(tmp_path / "t.jsonl", 2000)
    assert simulate_trace_stream(EngineConfig.from_argv([]), path, "mooncake", PRESET)
    assert 1 <= most[0] <= 3, most[0]
