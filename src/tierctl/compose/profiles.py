"""Compose profiles: which services of a file exist together.

Compose runs a service when it has no ``profiles:``, when one of its profiles is active, or
when ``*`` is active (``docker compose --profile P``, repeatable; else ``COMPOSE_PROFILES``,
comma-separated). Checks that compare services (a host port or a GPU given twice, a container
name used twice) must compare only services that can run together, or workers kept in mutually
exclusive profiles are reported as clashing. :class:`ProfileScope` answers that:

- with active profiles (``--profile``), exactly the project compose would run;
- without, every project the file can run on its own: the default set (the services without
  profiles) and, for each profile, the default set plus that profile's services. Two services
  can run together when one has no profiles or they share one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tierctl.compose.compose_file import ComposeFile

#: The profile that enables every service (``--profile '*'``).
ALL = "*"


def active_profiles(given: Sequence[str], environ: Mapping[str, str]) -> tuple[str, ...] | None:
    """The active profiles as compose picks them: the ``--profile`` values when any (the
    environment is then ignored, as compose ignores it), else ``COMPOSE_PROFILES`` split on
    commas (blanks trimmed, empty items dropped); None when neither names one."""
    if given:
        return tuple(dict.fromkeys(given))
    listed = [p.strip() for p in environ.get("COMPOSE_PROFILES", "").split(",")]
    chosen = tuple(dict.fromkeys(p for p in listed if p))
    return chosen or None


def enabled(profiles: Iterable[str], active: Iterable[str]) -> bool:
    """Whether compose runs a service with ``profiles`` when ``active`` are active."""
    own = set(profiles)
    chosen = set(active)
    return not own or ALL in chosen or bool(own & chosen)


def run_together(a: Iterable[str], b: Iterable[str], active: Iterable[str] | None = None) -> bool:
    """Whether services with profiles ``a`` and ``b`` can run in one project: both enabled
    by ``active``; without active profiles, in the default set or one profile's set (one of
    them has no profiles, or they share one)."""
    pa, pb = set(a), set(b)
    if active is not None:
        chosen = tuple(active)
        return enabled(pa, chosen) and enabled(pb, chosen)
    return not pa or not pb or bool(pa & pb)


@dataclass(frozen=True)
class ServiceSet:
    """One project the file can run: a label for messages and its services in file order."""

    label: str
    services: tuple[str, ...]
    #: The profiles active in it (``--profile`` values that run exactly this set).
    profiles: tuple[str, ...]


@dataclass(frozen=True)
class ProfileScope:
    """Which services of one (merged) file can run together.

    Attributes:
        active: The active profiles; None: every project the file can run on its own.
        profiles: Service name -> its profiles, in file order.
    """

    active: tuple[str, ...] | None
    profiles: Mapping[str, tuple[str, ...]]

    @classmethod
    def of(cls, compose: ComposeFile, active: Sequence[str] | None = None) -> ProfileScope:
        """The scope of ``compose`` under ``active`` profiles (None: not chosen)."""
        chosen = tuple(active) if active is not None else None
        return cls(chosen, {name: s.profiles for name, s in compose.services.items()})

    @property
    def named(self) -> tuple[str, ...]:
        """Every profile the file names, in first-use order."""
        return tuple(dict.fromkeys(p for ps in self.profiles.values() for p in ps))

    def runs(self, service: str) -> bool:
        """Whether ``service`` runs in some project of this scope (always, without active
        profiles: each profile's set is one)."""
        return self.active is None or enabled(self.profiles.get(service, ()), self.active)

    def together(self, a: str, b: str) -> bool:
        """Whether services ``a`` and ``b`` can run in one project of this scope."""
        return run_together(self.profiles.get(a, ()), self.profiles.get(b, ()), self.active)

    def sets(self) -> tuple[ServiceSet, ...]:
        """The projects checked: the active one, or the default set and each profile's."""
        if self.active is not None:
            names = tuple(n for n, ps in self.profiles.items() if enabled(ps, self.active))
            label = "profiles " + ", ".join(self.active)
            return (ServiceSet(label, names, self.active),)
        default = tuple(n for n, ps in self.profiles.items() if not ps)
        out = [ServiceSet("the default set (no profile active)", default, ())]
        for p in self.named:
            names = tuple(n for n, ps in self.profiles.items() if enabled(ps, (p,)))
            out.append(ServiceSet(f"profile {p}", names, (p,)))
        return tuple(out)

    def why_together(self, a: str, b: str) -> str:
        """Which project holds both (for a message): ``in the default set``, ``with profile
        P``, or ``with profiles P, Q`` (the active ones)."""
        if self.active is not None:
            return "with profiles " + ", ".join(self.active) + " active"
        pa, pb = self.profiles.get(a, ()), self.profiles.get(b, ())
        shared = [p for p in pa if p in pb] or list(pa or pb)
        return f"with profile {shared[0]}" if shared else "in the default set"

    def describe(self) -> str:
        """One line for a report: which projects the comparing checks looked at; empty when
        the file has no profiles and none is active (one project, nothing to say)."""
        if self.active is not None:
            return "profiles: " + ", ".join(self.active) + " active"
        if not self.named:
            return ""
        return (
            "profiles: none active; the default set and each profile's set ("
            + ", ".join(self.named)
            + ") checked separately"
        )


def only_active(compose: ComposeFile, active: Sequence[str] | None) -> ComposeFile:
    """The services compose runs with ``active`` profiles (``docker compose --profile P
    config`` prints just these); ``compose`` itself when ``active`` is None."""
    if active is None:
        return compose
    keep = {n for n, s in compose.services.items() if enabled(s.profiles, active)}
    data = dict(compose.data)
    if isinstance(data.get("services"), dict):
        data["services"] = {k: v for k, v in data["services"].items() if str(k) in keep}
    return replace(
        compose,
        data=data,
        services={n: s for n, s in compose.services.items() if n in keep},
    )
