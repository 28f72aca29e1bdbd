"""The two entry points behind the CLI: :func:`bench_run` and :func:`bench_ab`.

Each builds the plan and the prompt source, runs it, and writes the outputs (``results.json``
with every raw sample, ``report.md``, ``latency_cdf.png``, ``probe_latency.png``) when an
output directory is given. They are coroutines and draw nothing: the caller owns the event
loop (``asyncio.run``) and any progress display (a :class:`BenchProgress`). Ctrl-C stops the
run; what was measured so far is still returned and written.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import orjson

from tierctl.bench.ab import ABResult, MetricRatio, check_order, compare_arms, run_ab
from tierctl.bench.plan import RequestPlan, plan_requests
from tierctl.bench.prompts import make_prompt_source
from tierctl.bench.report import ab_json, ab_markdown, run_json, run_markdown
from tierctl.bench.runner import run_plan
from tierctl.bench.samples import RequestSample, RunRecord
from tierctl.bench.workload import BenchWorkload
from tierctl.credentials import mask_userinfo
from tierctl.errors import InputError, RuntimeFailure
from tierctl.netnames import dns_name_problem
from tierctl.paths import resolve_inside, write_owned
from tierctl.results import RESULTS_NAME, is_results_text

if TYPE_CHECKING:
    from tierctl.bench.health import ArmTarget, HealthReport
    from tierctl.bench.quality.lane import QualityResult
    from tierctl.bench.quality.spec import QualitySpec


@dataclass(frozen=True)
class RunOutcome:
    """What ``tierctl bench run`` produced."""

    record: RunRecord
    workload: BenchWorkload
    files: tuple[Path, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ABOutcome:
    """What ``tierctl bench ab`` produced."""

    result: ABResult
    ratios: tuple[MetricRatio, ...]
    workload: BenchWorkload
    files: tuple[Path, ...] = field(default_factory=tuple)
    #: The quality lane's verdict, when one was asked for.
    quality: QualityResult | None = None
    #: Arm health over the whole run (empty when nothing was watched).
    health: HealthReport | None = None


def check_url(url: str, param: str = "url") -> str:
    """Accept an http(s) base URL; strip a trailing slash. ``param`` names it in errors.

    Raises:
        InputError: not an http(s) URL with a host.
    """
    try:
        parts = urlsplit(url)
        hostname, _ = parts.hostname, parts.port  # a bad port or IPv6 bracket is a ValueError
    except ValueError:
        hostname = None
    if hostname is None or parts.scheme not in ("http", "https"):
        raise InputError(
            f"`{param}` must be an http(s) base URL",
            value=mask_userinfo(url),
            fix="for example http://127.0.0.1:30000",
            params=(param,),
        )
    problem = dns_name_problem(hostname)
    if problem:
        # The resolver's UnicodeError ("label too long") was a traceback (file fuzzer, #38).
        raise InputError(
            f"`{param}`'s host is no DNS name: {problem}",
            value=mask_userinfo(url)[:120],
            fix="for example http://127.0.0.1:30000",
            params=(param,),
        )
    return url.rstrip("/")


def check_reachable(url: str, param: str = "url", timeout_s: float = 10.0) -> None:
    """Open (and close) a TCP connection to ``url``'s host and port before any load is sent.

    A dead endpoint is an error, not a run in which every request "failed": the operator
    learns at once that nothing listens there, and no empty report is written.

    Raises:
        RuntimeFailure: connection refused, unresolvable host or no answer in ``timeout_s``.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except ConnectionRefusedError:
        reason = "connection refused"
    except TimeoutError:
        reason = f"no answer within {timeout_s:g} s"
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    else:
        return
    raise RuntimeFailure(
        f"cannot reach `{param}` {mask_userinfo(url)}: {reason}",
        fix="start the server, or check the host and port",
        params=(param,),
    )


class BenchProgress(Protocol):
    """What :func:`bench_run` and :func:`bench_ab` report while they run (the CLI draws bars)."""

    def begin(self, label: str, requests: int, block: int, blocks: int) -> None:
        """A run, or block ``block`` (0-based) of ``blocks``, of ``requests`` requests starts."""

    def request_done(self, sample: RequestSample) -> None:
        """One request ended (completed, failed or timed out)."""


async def bench_run(
    url: str,
    workload: BenchWorkload,
    *,
    tokenizer: str | None = None,
    out_dir: Path | None = None,
    plots: bool = True,
    progress: BenchProgress | None = None,
) -> RunOutcome:
    """Run ``workload`` against ``url`` with the probe lane; write outputs to ``out_dir``.

    Run it with ``asyncio.run(bench_run(...))``: a first Ctrl-C there cancels the run, and
    what was measured so far is still returned and written.

    Raises:
        InputError: bad URL, trace or tokenizer.
        RuntimeFailure: nothing listens at ``url``.
    """
    url = check_url(url)
    plan = plan_requests(workload)
    prompts = make_prompt_source(tokenizer, workload.seed)
    check_reachable(url)  # after the input checks: bad input is reported as such first
    if progress is not None:
        progress.begin(f"{workload.name} → {mask_userinfo(url)}", plan.size, 0, 1)
    record = await run_plan(
        url, workload, plan, prompts, progress=progress.request_done if progress else None
    )
    files: list[Path] = []
    if out_dir is not None:
        files += _write(out_dir, run_json(record, workload), run_markdown(record, workload))
        if plots:
            from tierctl.bench.plots import plot_run

            files += plot_run(record, out_dir, probe_timeout_s=workload.probe.timeout_s)
    return RunOutcome(record, workload, tuple(files))


async def bench_ab(
    a_url: str,
    b_url: str,
    workload: BenchWorkload,
    *,
    order: str = "ABBA",
    repetitions: int = 1,
    flush: bool = False,
    shared_prompts: bool = False,
    tokenizer: str | None = None,
    out_dir: Path | None = None,
    plots: bool = True,
    progress: BenchProgress | None = None,
    quality: QualitySpec | None = None,
    health: Sequence[ArmTarget] = (),
    health_interval_s: float = 5.0,
    names: tuple[str, str] | None = None,
) -> ABOutcome:
    """Paired A/B of ``workload`` between ``a_url`` and ``b_url``; ratios B/A with CIs.

    ``names`` (A's, B's), e.g. replica names, label the arms in the plots' legends. Run it
    with ``asyncio.run(bench_ab(...))``; Ctrl-C keeps the finished blocks.

    With ``quality`` (or a ``quality:`` section in the workload) the quality lane runs after
    the latency blocks; each arm's health (restarts, OOM kills, fatal log lines, queue-full
    rejections) is watched over the whole run through the sources ``health`` names and each
    arm's ``/metrics``.

    Raises:
        InputError: bad URL, order, repetitions, trace or tokenizer.
        RuntimeFailure: nothing listens at ``a_url`` or ``b_url``.
    """
    a_url, b_url = check_url(a_url, "a_url"), check_url(b_url, "b_url")
    order = check_order(order)
    if repetitions < 1:
        raise InputError(
            "`repetitions` must be at least 1", value=repetitions, params=("repetitions",)
        )
    plan: RequestPlan = plan_requests(workload)
    prompts = make_prompt_source(tokenizer, workload.seed)
    check_reachable(a_url, "a_url")
    check_reachable(b_url, "b_url")

    def on_block(k: int, total: int, arm: str) -> None:
        if progress is not None:
            progress.begin(f"block {k + 1}/{total} arm {arm}", plan.size, k, total)

    from tierctl.bench.health import ArmTarget
    from tierctl.bench.quality.check import ab_queue_full, watched
    from tierctl.bench.quality.lane import run_quality

    quality = quality or workload.quality
    targets = list(health) or [ArmTarget("A", a_url), ArmTarget("B", b_url)]

    async def everything() -> tuple[ABResult, QualityResult | None]:
        res = await run_ab(
            a_url,
            b_url,
            workload,
            prompts,
            order=order,
            repetitions=repetitions,
            flush=flush,
            shared_prompts=shared_prompts,
            plan=plan,
            on_block=on_block,
            progress=progress.request_done if progress else None,
        )
        if quality is None or res.interrupted:
            return res, None
        return res, await run_quality(
            a_url, b_url, quality, base_dir=workload.base_dir, model=workload.model
        )

    (result, quality_result), health_report = await watched(
        targets, everything, interval_s=health_interval_s, queue_full=ab_queue_full
    )
    lanes = [lane.name for lane in plan.lanes]
    ratios = tuple(compare_arms(result, lanes, seed=workload.seed))
    files: list[Path] = []
    if out_dir is not None:
        doc = ab_json(result, ratios, workload)
        doc["health"] = health_report.to_json()
        doc["warnings"] = list(result.warnings)
        markdown = ab_markdown(result, ratios, workload)
        markdown += "\n## Arm health\n\n" + "".join(f"- {ln}\n" for ln in health_report.lines())
        if quality_result is not None:
            from tierctl.bench.quality.report import write_quality

            doc["quality"] = {"verdict": quality_result.verdict, "report": "quality.json"}
            markdown += f"\n## Quality\n\n- {quality_result.verdict} (see quality.md)\n"
            files += write_quality(quality_result, out_dir, plots=plots)
        files += _write(out_dir, doc, markdown)
        if plots:
            from tierctl.bench.plots import plot_ab

            files += plot_ab(result, out_dir, probe_timeout_s=workload.probe.timeout_s, names=names)
    return ABOutcome(
        result, ratios, workload, tuple(files), quality=quality_result, health=health_report
    )


def _write(out_dir: Path, doc: dict[str, Any], markdown: str) -> list[Path]:
    """results.json and report.md, atomically, replacing only a results file and a report a
    bench wrote (``paths.write_owned``): another file of that name in ``out_dir`` is kept."""
    out_dir.mkdir(parents=True, exist_ok=True)
    text = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode()
    planned = [
        (resolve_inside(out_dir, name, field="bench output", inside="the output folder"), c, o)
        for name, c, o in (
            (RESULTS_NAME, text, is_results_text),
            ("report.md", markdown, _is_bench_report),
        )
    ]
    # Every file is checked before any is written: a refusal on report.md must not leave a
    # new results.json beside the old report.
    for check_only in (True, False):
        for path, content, ours in planned:
            write_owned(
                path, content, ours=ours, what=f"bench {path.name}", force_param=None,
                elsewhere="or give `out_dir` another folder", params=("out_dir",),
                check_only=check_only,
            )  # fmt: skip
    return [path for path, _, _ in planned]


def _is_bench_report(text: str) -> bool:
    return text.startswith("# tierctl bench ")
