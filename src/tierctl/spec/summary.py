"""A short account of a tier: its replicas and what differs between them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tierctl.spec.effective import Tier
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


def _argv_groups(argv: list[str]) -> tuple[tuple[str, ...], dict[str, list[str]]]:
    """Split a rendered argv into its launcher and ``--flag -> value tokens``.

    Read from the argv as rendered (not from the spec's values), so what show compares is
    exactly what each replica will run: a flag set to ``false`` is absent, ``--no-x`` is its
    own flag, ``--x=v`` is flag ``--x`` with value ``v``, and a repeated flag keeps every value.
    """
    launcher: list[str] = []
    groups: dict[str, list[str]] = {}
    current: list[str] | None = None
    for token in argv:
        if token.startswith("--") and len(token) > 2:
            name, eq, value = token.partition("=")
            current = groups.setdefault(name, [])
            if current:
                current.append(";")  # a second occurrence of a repeated flag
            if eq:
                current.append(value)
        elif current is None:
            launcher.append(token)
        else:
            current.append(token)
    return tuple(launcher), groups


def argv_differences(argvs: list[list[str]]) -> list[Difference]:
    """The flags whose rendered tokens differ between replicas, in first-seen order.

    Empty exactly when every argv is the same token list: a difference only in the order of
    the flags is reported as its own row, and so is a different launcher (positional args).
    """
    split = [_argv_groups(argv) for argv in argvs]
    diffs: list[Difference] = []
    launchers = tuple(" ".join(launcher) or "(none)" for launcher, _ in split)
    if len(set(launchers)) > 1:
        diffs.append(Difference("launcher", launchers))
    names: list[str] = []
    for _, groups in split:
        names += [n for n in groups if n not in names]
    for name in names:
        shown = tuple(
            (" ".join(groups[name]) or "on") if name in groups else "(unset)" for _, groups in split
        )
        if len(set(shown)) > 1:
            diffs.append(Difference(name, shown))
    if not diffs and len({tuple(argv) for argv in argvs}) > 1:
        first = argvs[0]
        diffs.append(
            Difference(
                "argv order or form", tuple("as first" if a == first else "differs" for a in argvs)
            )
        )
    return diffs


def summarise(tier: Tier) -> Summary:
    """Replicas, their differing flags/env (ports and dist-init addresses included), notes."""
    spec = tier.spec
    replicas = list(tier.replicas.values())
    lines = tuple(
        ReplicaLine(
            r.name,
            r.service,
            r.role or "-",
            "cpu" if r.gpu_count == 0 else _gpu_text(r.gpus),
            r.port,
            r.variant,
        )
        for r in replicas
    )
    diffs = argv_differences([r.argv for r in replicas])
    env_keys: list[str] = []
    for r in replicas:
        env_keys += [k for k in r.env if k not in env_keys]
    for key in env_keys:
        values = tuple(_env_shown(r.env, key) for r in replicas)
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


def _env_shown(env: dict[str, str | None], key: str) -> str:
    """An effective env value as ``show`` prints it."""
    if key not in env:
        return "(unset)"
    value = env[key]
    return "(from the host)" if value is None else value
