"""The two entry points behind the CLI: :func:`bench_run` and :func:`bench_ab`.

Each builds the plan and the prompt source, runs the event loop with progress bars, and writes
the outputs (``results.json`` with every raw sample, ``report.md``, ``latency_cdf.png``,
``probe_latency.png``) when an output directory is given. Ctrl-C stops the run; what was
measured so far is still returned and written.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tierctl.bench.ab import ABResult, MetricRatio, check_order, compare, run_ab
from tierctl.bench.plan import Plan, build_plan
from tierctl.bench.prompts import make_prompt_source
from tierctl.bench.report import ab_json, ab_markdown, run_json, run_markdown
from tierctl.bench.runner import run_plan
from tierctl.bench.samples import RequestSample, RunRecord
from tierctl.bench.workload import Workload
from tierctl.errors import InputError, RuntimeFailure

T = TypeVar("T")


@dataclass(frozen=True)
class RunOutcome:
    """What ``tierctl bench run`` produced."""

    record: RunRecord
    workload: Workload
    files: tuple[Path, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ABOutcome:
    """What ``tierctl bench ab`` produced."""

    result: ABResult
    ratios: tuple[MetricRatio, ...]
    workload: Workload
    files: tuple[Path, ...] = field(default_factory=tuple)


def check_url(url: str, param: str = "url") -> str:
    """Accept an http(s) base URL; strip a trailing slash. ``param`` names it in errors.

    Raises:
        InputError: not an http(s) URL with a host.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            f"`{param}` must be an http(s) base URL",
            value=url,
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
        f"cannot reach `{param}` {url}: {reason}",
        fix="start the server, or check the host and port",
        params=(param,),
    )


def bench_run(
    url: str,
    workload: Workload,
    *,
    tokenizer: str | None = None,
    out_dir: Path | None = None,
    plots: bool = True,
    console: Console | None = None,
) -> RunOutcome:
    """Run ``workload`` against ``url`` with the probe lane; write outputs to ``out_dir``.

    Raises:
        InputError: bad URL, trace or tokenizer.
        RuntimeFailure: nothing listens at ``url``.
    """
    url = check_url(url)
    plan = build_plan(workload)
    prompts = make_prompt_source(tokenizer, workload.seed)
    check_reachable(url)  # after the input checks: bad input is reported as such first
    console = console or Console(stderr=True)
    with _bars(console) as bars:
        task = bars.add_task(f"{workload.name} → {url}", total=plan.size)

        def tick(_: RequestSample) -> None:
            bars.advance(task)

        record = _run_loop(lambda: run_plan(url, workload, plan, prompts, progress=tick))
    files: list[Path] = []
    if out_dir is not None:
        files += _write(out_dir, run_json(record, workload), run_markdown(record, workload))
        if plots:
            from tierctl.bench.plots import plot_run

            files += plot_run(record, out_dir, probe_timeout_s=workload.probe.timeout_s)
    return RunOutcome(record, workload, tuple(files))


def bench_ab(
    a_url: str,
    b_url: str,
    workload: Workload,
    *,
    order: str = "ABBA",
    repetitions: int = 1,
    flush: bool = False,
    tokenizer: str | None = None,
    out_dir: Path | None = None,
    plots: bool = True,
    console: Console | None = None,
    names: tuple[str, str] | None = None,
) -> ABOutcome:
    """Paired A/B of ``workload`` between ``a_url`` and ``b_url``; ratios B/A with CIs.

    ``names`` (A's, B's), e.g. replica names, label the arms in the plots' legends.

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
    plan: Plan = build_plan(workload)
    prompts = make_prompt_source(tokenizer, workload.seed)
    check_reachable(a_url, "a_url")
    check_reachable(b_url, "b_url")
    console = console or Console(stderr=True)
    total_blocks = repetitions * len(order)
    with _bars(console) as bars:
        overall = bars.add_task("blocks", total=total_blocks)
        block_task = bars.add_task("block", total=plan.size, visible=False)

        def on_block(k: int, total: int, arm: str) -> None:
            bars.update(overall, completed=k)
            bars.reset(block_task, total=plan.size, visible=True)
            bars.update(block_task, description=f"block {k + 1}/{total} arm {arm}")

        def tick(_: RequestSample) -> None:
            bars.advance(block_task)

        result = _run_loop(
            lambda: run_ab(
                a_url,
                b_url,
                workload,
                prompts,
                order=order,
                repetitions=repetitions,
                flush=flush,
                plan=plan,
                on_block=on_block,
                progress=tick,
            )
        )
        bars.update(overall, completed=len(result.blocks))
    lanes = [lane.name for lane in plan.lanes]
    ratios = tuple(compare(result, lanes, seed=workload.seed))
    files: list[Path] = []
    if out_dir is not None:
        files += _write(
            out_dir, ab_json(result, ratios, workload), ab_markdown(result, ratios, workload)
        )
        if plots:
            from tierctl.bench.plots import plot_ab

            files += plot_ab(result, out_dir, probe_timeout_s=workload.probe.timeout_s, names=names)
    return ABOutcome(result, ratios, workload, tuple(files))


def _bars(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def _run_loop(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    # asyncio.run turns the first Ctrl-C into a cancellation of the main task; the runners
    # catch it and return what they measured, so the partial result comes back here.
    return asyncio.run(make())


def _write(out_dir: Path, doc: dict[str, Any], markdown: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "results.json"
    json_path.write_bytes(
        orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
    )
    md_path = out_dir / "report.md"
    md_path.write_text(markdown, encoding="utf-8")
    return [json_path, md_path]
