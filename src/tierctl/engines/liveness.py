"""Did an engine stay the same process, and did its log stay clean? The one definition.

Two lifecycle steps ask it: the load client's health lane (:mod:`tierctl.bench.health`, over a
whole run) and the rollout soak gate (:mod:`tierctl.rollout.gates`, over the soak window).
A process's identity is ``process_start_time_seconds`` on ``/metrics`` (prometheus_client's
process collector, which real engines and ``sim serve`` export): a changed value is a restart.
Log lines are matched against the engine profile's fatal patterns
(:attr:`tierctl.engines.EngineProfile.fatal_log_patterns`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx

from tierctl.engines import profile_for
from tierctl.engines.base import EngineProfile
from tierctl.runtime.promtext import parse_metrics

START_TIME_METRIC = "process_start_time_seconds"


def metrics_start_time(client: httpx.Client, url: str) -> str | None:
    """``process_start_time_seconds`` from ``url/metrics`` (None when unreachable/absent)."""
    try:
        resp = client.get(url.rstrip("/") + "/metrics", timeout=5.0)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    found = [s.value_text for s in parse_metrics(resp.text) if s.name == START_TIME_METRIC]
    return found[0] if found else None


def log_matches(
    profile: EngineProfile, text: str
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(fatal, warnings)``: ``(pattern name, line)`` of the lines matching the profile's
    patterns, split by whether the pattern is fatal (a traceback alone is only a warning)."""
    fatal_by_name = {p.name: p.fatal for p in profile.fatal_log_patterns}
    fatal: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []
    for name, line in profile.fatal_lines(text):
        (fatal if fatal_by_name.get(name, True) else warnings).append((name, line))
    return fatal, warnings


@dataclass(frozen=True)
class LivenessMark:
    """An engine's identity and log length at one instant (e.g. a rollout soak's ends)."""

    started: str | None
    log_chars: int | None
    log_text: str | None


def liveness_mark(
    client: httpx.Client, base_url: str | None, logs: Callable[[], str | None] | None
) -> LivenessMark:
    """The start time from ``/metrics`` and the log so far (when the caller can read it)."""
    started = metrics_start_time(client, base_url) if base_url else None
    text = logs() if logs is not None else None
    return LivenessMark(started, len(text) if text is not None else None, text)


def liveness_problems(
    before: LivenessMark, after: LivenessMark, profile: EngineProfile | None = None
) -> list[str]:
    """What went wrong between two marks: a changed start time, fatal lines logged between."""
    out: list[str] = []
    if before.started is not None and after.started is not None and before.started != after.started:
        out.append(f"restarted (process start time {before.started} -> {after.started})")
    if after.log_text is not None:
        start = before.log_chars or 0
        if len(after.log_text) < start:  # the log was replaced (a new container): read it all
            start = 0
        fatal, _ = log_matches(profile or profile_for("sglang"), after.log_text[start:])
        out += [f"fatal log line [{name}] {line.strip()[:200]}" for name, line in fatal]
    return out
