"""Which engine a running server is: the one rule every "what is at this URL" question uses.

The rule, strongest evidence first:

1. the series its ``/metrics`` exports (the first profile whose metric prefix they carry);
2. an identity endpoint only one engine serves (:attr:`EngineProfile.identity_paths`:
   SGLang's ``/server_info``; vLLM has one only in dev mode and exports metrics anyway);
3. else unknown: :func:`engine_at` answers None, and a caller that needs a profile takes
   :func:`tierctl.engines.default_profile` (:func:`engine_at_or_default`), never a kind of
   its own choosing.

The HTTP is the caller's (a ``Probe``: GET a path, the body on a 200, else None), so the load
client's aiohttp session and the health lane's httpx client ask the same question the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from tierctl.engines.base import EngineProfile
from tierctl.runtime.promtext import parse_metrics

#: GET ``path`` on the server: the body of a 200 answer, else None (refused, other status).
Probe = Callable[[str], str | None]
#: The same on an event loop.
AsyncProbe = Callable[[str], Awaitable[str | None]]


def metric_names(text: str) -> set[str]:
    """The series names of a Prometheus text exposition (read with :mod:`runtime.promtext`)."""
    return {sample.name for sample in parse_metrics(text)}


def profile_for_metrics(
    names: Iterable[str], profiles: Iterable[EngineProfile]
) -> EngineProfile | None:
    """The first of ``profiles`` whose series the metric ``names`` hold, or None."""
    have = set(names)
    for profile in profiles:
        if profile.detect_prefix(have) is not None:
            return profile
    return None


def _metrics_paths(profiles: Iterable[EngineProfile]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p.metrics_path for p in profiles))


def engine_at(probe: Probe, profiles: Iterable[EngineProfile]) -> EngineProfile | None:
    """The engine behind a server (the module's rule), or None when nothing tells."""
    known = tuple(profiles)
    for path in _metrics_paths(known):
        text = probe(path)
        found = profile_for_metrics(metric_names(text), known) if text is not None else None
        if found is not None:
            return found
    for profile in known:
        if any(probe(path) is not None for path in profile.identity_paths):
            return profile
    return None


async def engine_at_async(
    probe: AsyncProbe, profiles: Iterable[EngineProfile]
) -> EngineProfile | None:
    """:func:`engine_at` with an awaited probe (same rule, same order)."""
    known = tuple(profiles)
    for path in _metrics_paths(known):
        text = await probe(path)
        found = profile_for_metrics(metric_names(text), known) if text is not None else None
        if found is not None:
            return found
    for profile in known:
        for path in profile.identity_paths:
            if await probe(path) is not None:
                return profile
    return None
