"""tierctl.bench: workloads, liveness probes under load, and paired A/B between two endpoints.

The CLI entry points are :func:`bench_run` and :func:`bench_ab`; the pieces they are built from
(:func:`build_plan`, :func:`run_plan`, :func:`run_ab`, :func:`compare`) are usable on their own.
Importing this package pulls in aiohttp and numpy (the ``bench`` extra).
"""

from tierctl.bench.ab import ABResult, Block, MetricRatio, compare, run_ab
from tierctl.bench.execute import ABOutcome, BenchProgress, RunOutcome, bench_ab, bench_run
from tierctl.bench.plan import Plan, PlannedRequest, build_plan
from tierctl.bench.probe import Episode, unhealthy_episodes
from tierctl.bench.runner import run_plan
from tierctl.bench.samples import ProbeSample, RequestSample, RunRecord
from tierctl.bench.workload import Workload, load_workload, workload_from_dict
from tierctl.traces import TraceRow, read_trace

__all__ = [
    "ABOutcome",
    "ABResult",
    "BenchProgress",
    "Block",
    "Episode",
    "MetricRatio",
    "Plan",
    "PlannedRequest",
    "ProbeSample",
    "RequestSample",
    "RunOutcome",
    "RunRecord",
    "TraceRow",
    "Workload",
    "bench_ab",
    "bench_run",
    "build_plan",
    "compare",
    "load_workload",
    "read_trace",
    "run_ab",
    "run_plan",
    "unhealthy_episodes",
    "workload_from_dict",
]
