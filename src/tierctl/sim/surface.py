"""What the simulator must know about each engine it imitates, in one place.

The engine profiles (:mod:`tierctl.engines`) own the launchers, ports, metric names and the
set of scheduler flags the simulator models; this module adds only what a *stand-in* for the
engine needs beyond them: the release it answers as, the ``owned_by`` it reports, and the flags
that identify or address a replica (two arms differ in them by design, so ``sim compare``
does not warn about them).
"""

from __future__ import annotations

from dataclasses import dataclass

from tierctl.engines import default_profile, profile_for, profile_for_argv


@dataclass(frozen=True)
class EngineSurface:
    """The parts of one engine the simulator imitates."""

    kind: str
    version: str  # the release the simulated server reports
    default_port: int
    owned_by: str  # /v1/models "owned_by"
    metric_prefix: str
    # Flags the scheduler or cost model reads: a difference between two arms changes results.
    modelled_flags: frozenset[str]
    # Flags that identify or address a replica, or only change logging: arms differ in them
    # as a matter of course and the simulation is rightly blind to them.
    neutral_flags: frozenset[str]


SGLANG = EngineSurface(
    kind="sglang",
    version="0.5.23",
    default_port=profile_for("sglang").default_port,
    owned_by="sglang",
    metric_prefix=profile_for("sglang").prefix,
    modelled_flags=profile_for("sglang").sim_modelled_flags,
    neutral_flags=frozenset(
        {
            "model-path",
            "model",
            "served-model-name",
            "host",
            "port",
            "dist-init-addr",
            "nccl-port",
            "enable-metrics",
            "log-level",
            "log-requests",
            "log-requests-level",
            "decode-log-interval",
            "api-key",
            "trust-remote-code",
            "skip-server-warmup",
            "enable-cache-report",
        }
    ),
)

VLLM = EngineSurface(
    kind="vllm",
    version="0.33.0",
    default_port=profile_for("vllm").default_port,
    owned_by="vllm",
    metric_prefix=profile_for("vllm").prefix,
    modelled_flags=profile_for("vllm").sim_modelled_flags,
    neutral_flags=frozenset(
        {
            "model",
            "served-model-name",
            "host",
            "port",
            "api-key",
            "disable-log-stats",
            "disable-log-requests",
            "enable-log-requests",
            "uvicorn-log-level",
            "trust-remote-code",
            "seed",
        }
    ),
)

#: The engines the simulator imitates, by kind (each a kind of ``engines.PROFILES``: tested);
#: an engine without a surface here is not modelled (docs/sim.md).
SURFACES: dict[str, EngineSurface] = {s.kind: s for s in (SGLANG, VLLM)}
#: Their kinds, for choices.
ENGINES: tuple[str, ...] = tuple(SURFACES)


def surface(kind: str) -> EngineSurface:
    """The surface of engine ``kind`` (a key of :data:`SURFACES`)."""
    return SURFACES[kind]


def detect_engine(argv: tuple[str, ...] | list[str]) -> str:
    """The engine an argv launches (per the engine profiles); the default engine when it
    names none."""
    head: list[str] = []
    for token in argv:
        if token.startswith("-") and token != "-m":
            break
        head.append(token)
    found = profile_for_argv(head)
    return (found or default_profile()).kind
