"""A short account of a tier: its replicas and what differs between them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tierctl.spec.effective import Tier, flag_tokens
from tierctl.spec.rules import check_rules


@dataclass(frozen=True)
class ReplicaLine:
    """One replica in the summary."""

    name: str
    service: str
    role: str
    gpus: str
    port: int
    variant: str


@dataclass(frozen=True)
class Difference:
    """A flag or env var whose value is not the same on every replica."""

    setting: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Summary:
    """What ``tierctl show`` prints."""

    tier: str
    host: str
    engine: str
    replicas: tuple[ReplicaLine, ...]
    differences: tuple[Difference, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return asdict(self)


def _gpu_text(gpus: tuple[int, ...]) -> str:
    if len(gpus) > 1 and list(gpus) == list(range(gpus[0], gpus[0] + len(gpus))):
        return f"{gpus[0]}-{gpus[-1]}"
    return ",".join(str(g) for g in gpus)


def summarise(tier: Tier) -> Summary:
    """Replicas, their differing flags/env (ports and dist-init addresses included), notes."""
    spec = tier.spec
    replicas = list(tier.replicas.values())
    lines = tuple(
        ReplicaLine(r.name, r.service, r.role or "-", _gpu_text(r.gpus), r.port, r.variant)
        for r in replicas
    )
    names: list[str] = []
    for r in replicas:
        names += [n for n in r.flags if n not in names]
    diffs: list[Difference] = []
    for name in names:
        shown = tuple(
            " ".join(flag_tokens(name, r.flags[name])[1:]) or "on" if name in r.flags else "(unset)"
            for r in replicas
        )
        if len(set(shown)) > 1:
            diffs.append(Difference(f"--{name}", shown))
    env_keys: list[str] = []
    for r in replicas:
        env_keys += [k for k in r.env if k not in env_keys]
    for key in env_keys:
        values = tuple(r.env.get(key, "(unset)") for r in replicas)
        if len(set(values)) > 1:
            diffs.append(Difference(f"env {key}", values))
    notes: list[str] = []
    for r in replicas:
        for failure in check_rules(spec, r.flags, r.env):
            notes.append(
                f"rule {failure.name} fails on {r.name}: needs {'; '.join(failure.missing)} "
                f"({failure.rule.because})"
            )
    if len({r.variant for r in replicas}) < len(replicas) and any(r.role for r in replicas):
        notes.append(
            "two replicas with roles report the same variant: readout cannot tell them apart"
        )
    return Summary(
        tier=spec.tier,
        host=spec.host,
        engine=f"{spec.engine.kind} {spec.engine.version} ({spec.engine.image.split('@')[0]})",
        replicas=lines,
        differences=tuple(diffs),
        notes=tuple(notes),
    )
