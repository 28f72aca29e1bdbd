"""Plans: seeded, indexed, bounded."""

from __future__ import annotations

import pytest

from tierctl.bench.plan import plan_requests
from tierctl.bench.workload import workload_from_dict


def _wl(seed: int = 1, **hammer: object):
    lane: dict[str, object] = {
        "kind": "hammer",
        "rate_rps": 50,
        "count": 200,
        "input_tokens": 10,
        "output_tokens": 2,
    }
    lane.update(hammer)
    return workload_from_dict(
        {
            "seed": seed,
            "lanes": [
                {"kind": "burst", "count": 3, "input_tokens": 99, "output_tokens": 7, "at_s": 2},
                lane,
            ],
        }
    )


def test_same_seed_same_plan_other_seed_other_arrivals():
    assert plan_requests(_wl(1)) == plan_requests(_wl(1))
    a = [r.offset_s for r in plan_requests(_wl(1)).lanes[1].requests]
    b = [r.offset_s for r in plan_requests(_wl(2)).lanes[1].requests]
    assert a != b


def test_indices_are_unique_across_lanes_and_burst_is_simultaneous():
    plan = plan_requests(_wl())
    idx = [r.index for lane in plan.lanes for r in lane.requests]
    assert idx == list(range(plan.size))
    assert {r.offset_s for r in plan.lanes[0].requests} == {2.0}
    assert plan.max_input_tokens == 99


def test_poisson_arrivals_have_roughly_the_rate():
    offsets = [r.offset_s for r in plan_requests(_wl(count=2000)).lanes[1].requests]
    assert offsets == sorted(offsets)
    mean_gap = offsets[-1] / (len(offsets) - 1)
    assert mean_gap == pytest.approx(1 / 50, rel=0.1)


def test_constant_arrivals_and_duration_bound():
    reqs = plan_requests(_wl(arrival="constant", duration_s=1.0, start_s=0.5)).lanes[1].requests
    assert len(reqs) == 50
    assert reqs[0].offset_s == 0.5
    assert reqs[1].offset_s - reqs[0].offset_s == pytest.approx(0.02)


def test_closed_loop_lane_carries_concurrency_and_stop():
    lane = plan_requests(_wl(rate_rps=None, concurrency=4, duration_s=3)).lanes[1]
    assert lane.concurrency == 4
    assert lane.stop_s == 3
    assert len(lane.requests) == 200


def test_trace_lane_scales_time_and_clips(tmp_path):
    (tmp_path / "t.jsonl").write_text(
        '{"arrival_s": 0, "input_tokens": 5000, "output_tokens": 10}\n'
        '{"arrival_s": 4, "input_tokens": 100, "output_tokens": 900}\n',
        encoding="utf-8",
    )
    wl = workload_from_dict(
        {
            "base_dir": str(tmp_path),
            "lanes": [
                {
                    "kind": "trace",
                    "path": "t.jsonl",
                    "time_scale": 0.5,
                    "max_input_tokens": 1000,
                    "max_output_tokens": 64,
                    "start_s": 1,
                }
            ],
        }
    )
    reqs = plan_requests(wl).lanes[0].requests
    assert [(r.offset_s, r.input_tokens, r.output_tokens) for r in reqs] == [
        (1.0, 1000, 10),
        (3.0, 100, 64),
    ]
