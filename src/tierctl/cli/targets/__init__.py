"""Deployment targets: the second axis beside engines, one registry every command goes through.

A target is where a tier runs (docker compose, Kubernetes). Each is one adapter module here
(``cli/targets/<name>.py``, exporting ``TARGET``) binding the command steps to the library
modules that implement them for that target (its ``modules``, keyed by :data:`STEPS`).
Every command that depends on the target dispatches through :func:`for_step` (or
:func:`checked`, for the target ``auto`` found): ``render``, ``validate``, ``import``, ``plan``,
``runbook`` and ``rollout`` (and ``kube plan``, the old spelling of ``runbook --target
kubernetes``); a step the target does not register is refused (exit 2, naming the steps it
has). ``auto`` asks each target in turn whether it claims the inputs
(:func:`detect`), the first registered one (compose) taking what no other claims. Nothing else
in the CLI writes ``if target == ...``.

A new target is its library modules, its adapter here, and one entry in :data:`TARGETS`
(tested with a stub target in tests/unit/cli/test_targets.py: render, validate, runbook, and
the refusal of the steps it lacks). Adapters are imported only when
a command needs one, so ``tierctl --help`` loads none of them.

The registry lives in the CLI because it is the one layer allowed to import every target's
modules (compose's ``contracts`` and ``adopt``, Kubernetes's ``contracts.kubernetes``,
``adopt.kubernetes``, ``rollout.kubernetes`` and ``render.kubernetes``);
the library steps stay target-specific and never see each other.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tierctl.errors import InputError

if TYPE_CHECKING:
    from tierctl.cli.rollout import RolloutArgs
    from tierctl.contracts.crosscheck import ComposeCheck
    from tierctl.contracts.report import Report, Violation
    from tierctl.errors import ExitCode
    from tierctl.spec.tier_spec import TierSpec

#: Every target, by name, the default (what no other target claims) first: its adapter module.
TARGETS: dict[str, str] = {
    "compose": "tierctl.cli.targets.compose",
    "kubernetes": "tierctl.cli.targets.kubernetes",
}

#: The steps a target may implement, as ``DeployTarget.modules`` keys (``fleet``: the plan,
#: runbook and rollout of many hosts in waves, ``--fleet FLEET``).
STEPS = ("render", "validate", "import", "plan", "runbook", "rollout", "fleet")


@dataclass(frozen=True)
class RenderRequest:
    """``tierctl render``'s inputs, as one target needs them."""

    spec: TierSpec
    spec_path: Path
    output: Path | None  # --output: where to compare or write instead of the spec's own
    writes: bool  # --write or --check: the spec's own output must stay in its folder
    allow_outside: bool
    profiles: Sequence[str] | None


@dataclass(frozen=True)
class Rendering:
    """A target's rendering: the text, where it goes, what validate would say of it."""

    text: str
    path: Path
    violations: Sequence[Violation]
    command: str = ""  # the ``render`` options that made it (" --target kubernetes")


@dataclass(frozen=True)
class ValidateRequest:
    """``tierctl validate``'s inputs (each file is read once: ``readers.read_once``)."""

    paths: tuple[Path, ...]
    spec_path: Path | None
    catalog: str | None
    engine: str | None
    strict: bool
    profiles: Sequence[str] | None
    compose_check: ComposeCheck
    kube_version: str | None = None


@dataclass(frozen=True)
class ImportRequest:
    """``tierctl import``'s inputs."""

    paths: tuple[Path, ...]
    out: Path
    tier: str | None
    host: str
    engine: str | None
    engine_services: tuple[str, ...] = ()
    profiles: Sequence[str] | None = None
    #: ``--output`` as given (None: the spec goes to standard output, and no message may
    #: name a file that is not written).
    written_to: Path | None = None


@dataclass(frozen=True)
class Imported:
    """An import's spec text and its round trip."""

    text: str
    replicas: int
    services: int
    notes: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    differ: str = "the spec renders a different file"
    same: str = "the spec renders an equivalent file"


@dataclass(frozen=True)
class ChangeRequest:
    """``tierctl plan`` and ``tierctl runbook``'s inputs: the change from OLD to NEW (each
    side one file or several merged; a target may take one file a side)."""

    old: tuple[str, ...]
    new: tuple[str, ...]
    spec: Path | None = None
    allow: frozenset[str] = frozenset()
    protect: frozenset[str] = frozenset()
    repo: Path | None = None
    profiles: Sequence[str] | None = None
    manifest: str | None = None  # where NEW's rendering is (a target that renders files)
    old_manifest: str | None = None  # a kept copy of OLD's rendering, for the rollback


@dataclass(frozen=True)
class Planned:
    """A target's plan or runbook: what is printed, what ``-o`` writes, and how a file it
    wrote is recognised (``paths.write_owned``'s ``ours``)."""

    text: str
    ours: Callable[[str], bool]
    data: str | None = None  # the plan as JSON (``--format json``, ``-o``), where it has one


class DeployTarget(Protocol):
    """One deployment target's adapter."""

    @property
    def name(self) -> str:
        """Its ``--target`` value."""
        ...

    @property
    def modules(self) -> Mapping[str, str]:
        """Step (:data:`STEPS`) -> the library module implementing it for this target."""
        ...

    def claims(self, paths: Sequence[Path]) -> bool:
        """Whether the inputs are this target's (``--target auto``)."""
        ...

    def render(self, request: RenderRequest) -> Rendering:
        """The spec rendered for this target, gated by its validation."""
        ...

    def validate(self, request: ValidateRequest) -> Report:
        """The inputs checked (against the spec when there is one)."""
        ...

    def import_files(self, request: ImportRequest) -> Imported:
        """A tier spec for the inputs, with its round trip."""
        ...

    def plan(self, request: ChangeRequest) -> Planned:
        """The change's plan (``modules["plan"]``)."""
        ...

    def runbook(self, request: ChangeRequest) -> Planned:
        """The change's runbook, in Markdown (``modules["runbook"]``)."""
        ...

    def rollout(self, args: RolloutArgs) -> ExitCode:
        """A plan executed (``modules["rollout"]``)."""
        ...


def names() -> tuple[str, ...]:
    """The registered targets' names (the ``--target`` choices), the default first."""
    return tuple(TARGETS)


def target(name: str) -> DeployTarget:
    """The adapter of target ``name`` (imported on first use)."""
    adapter: DeployTarget = importlib.import_module(TARGETS[name]).TARGET
    return adapter


def detect(paths: Sequence[Path]) -> DeployTarget:
    """The target whose inputs these are: the first, after the default, that claims them;
    else the default (a compose file claims nothing a Kubernetes manifest has)."""
    default, *others = names()
    for name in others:
        candidate = target(name)
        if candidate.claims(paths):
            return candidate
    return target(default)


#: Each step's adapter method (``fleet`` is a mode of plan, runbook and rollout).
STEP_METHODS = {
    "render": "render",
    "validate": "validate",
    "import": "import_files",
    "plan": "plan",
    "runbook": "runbook",
    "rollout": "rollout",
}


def for_step(name: str, step: str) -> DeployTarget:
    """Target ``name``'s adapter for ``step`` (:func:`checked`)."""
    return checked(target(name), step)


def checked(adapter: DeployTarget, step: str) -> DeployTarget:
    """``adapter``, refused (exit 2, naming the steps it has and the targets that have
    ``step``) when it registers no module for the step."""
    if step in adapter.modules:
        return adapter
    name = adapter.name
    has = ", ".join(s for s in STEPS if s in adapter.modules)
    others = [n for n in names() if step in target(n).modules]
    where = f" (--target {' or '.join(others)} has it)" if others else ""
    raise InputError(
        f"the {name} target has no {step} step{where}",
        rule="a target runs the steps its adapter registers (cli/targets/)",
        value=name,
        fix=f"use a step the {name} target has ({has})"
        + (", e.g. runbook: its rollout as commands to run" if "runbook" in has else ""),
    )


def chosen(name: str, paths: Sequence[Path]) -> DeployTarget:
    """``--target NAME``'s adapter; ``auto``: :func:`detect`."""
    return detect(paths) if name == "auto" else target(name)
