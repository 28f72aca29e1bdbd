"""tierctl.bench: workloads, liveness probes under load, and paired A/B between two endpoints.

The CLI entry points are :func:`bench_run` and :func:`bench_ab`; the pieces they are built from
(:func:`plan_requests`, :func:`run_plan`, :func:`run_ab`, :func:`compare_arms`) are usable on
their own.
Importing this package pulls in aiohttp and numpy (the ``bench`` extra).
"""

from tierctl.bench.ab import ABResult, Block, MetricRatio, compare_arms, run_ab
from tierctl.bench.execute import ABOutcome, BenchProgress, RunOutcome, bench_ab, bench_run
from tierctl.bench.plan import PlannedRequest, RequestPlan, plan_requests
from tierctl.bench.probe import Episode, unhealthy_episodes
from tierctl.bench.runner import run_plan
from tierctl.bench.samples import ProbeSample, RequestSample, RunRecord
from tierctl.bench.workload import BenchWorkload, load_workload, workload_from_dict
from tierctl.traces import TraceRow, read_trace

__all__ = [
    "ABOutcome",
    "ABResult",
    "BenchProgress",
    "BenchWorkload",
    "Block",
    "Episode",
    "MetricRatio",
    "PlannedRequest",
    "ProbeSample",
    "RequestPlan",
    "RequestSample",
    "RunOutcome",
    "RunRecord",
    "TraceRow",
    "bench_ab",
    "bench_run",
    "compare_arms",
    "load_workload",
    "plan_requests",
    "read_trace",
    "run_ab",
    "run_plan",
    "unhealthy_episodes",
    "workload_from_dict",
]
