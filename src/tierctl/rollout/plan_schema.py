"""The plan as data: what changes per service, and the ordered steps that apply it.

A plan is written by ``tierctl plan --format json`` and read back by ``tierctl rollout --plan``, so it
is a boundary model (pydantic, ``extra="forbid"``). Its :func:`plan_digest` ties a journal to
the exact plan it records.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tierctl.rollout.roles import VARIANT_LABEL

ChangeKind = Literal["unchanged", "recreate", "added", "removed"]
Reason = Literal["argv", "env", "image", "labels", "logging", "config", "other"]
Action = Literal["down", "recreate", "up"]
Side = Literal["old", "new"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceRef(_Model):
    """Where one side of the plan was read from."""

    spec: str = Field(description="The argument as given: a path or git:REF:PATH.")
    path: str = Field(description="The compose file path (inside the repository for git: refs).")
    git_ref: str | None = Field(default=None, description="The git ref for git:REF:PATH sources.")
    sha256: str = Field(description="SHA-256 of the file's bytes, checked again before rollout.")


class ServiceChange(_Model):
    """How one service differs between OLD and NEW."""

    service: str = Field(description="The compose service name.")
    change: ChangeKind = Field(description="unchanged, recreate, added or removed.")
    role: str = Field(description="The service role: engine, collector, proxy, registrar, ...")
    replica_role: str | None = Field(default=None, description="canary or control, engines only.")
    replica: str | None = Field(
        default=None, description="The spec's replica name (tierctl.replica label), engines only."
    )
    reasons: list[Reason] = Field(default_factory=list, description="What differs, by kind.")
    details: list[str] = Field(
        default_factory=list, description="Readable differences: flags, env keys, labels."
    )
    old_variant: str | None = Field(default=None, description="The variant label in OLD.")
    new_variant: str | None = Field(default=None, description="The variant label in NEW.")


class Step(_Model):
    """One rollout step: one service, one action, its gates and its rollback."""

    id: str = Field(description="Stable step id, e.g. '02-recreate-model-r2'.")
    action: Action = Field(description="down (scoped, OLD file), recreate or up (NEW file).")
    service: str = Field(description="The one service this step touches.")
    role: str = Field(description="The service's role.")
    side: Side = Field(description="Which file the action uses.")
    why: str = Field(description="Why this step exists, for people.")
    gates: list[str] = Field(
        default_factory=list, description="Gates run after the action: health, server-info, ..."
    )
    container_name: str | None = Field(default=None, description="container_name in the file.")
    variant: str | None = Field(default=None, description="The variant expected after.")
    expected_argv: list[str] = Field(
        default_factory=list, description="The rendered command the engine must report."
    )
    rollback: str = Field(description="How this step is undone, for people.")


class Plan(_Model):
    """The whole plan between two compose files."""

    version: Literal[1] = Field(default=1, description="Plan format version.")
    source: SourceRef = Field(description="OLD: the compose file running now.")
    target: SourceRef = Field(description="NEW: the compose file to roll out.")
    source_overrides: list[SourceRef] = Field(
        default_factory=list,
        description="OLD's further files, merged over it in order (docker compose -f a -f b).",
    )
    target_overrides: list[SourceRef] = Field(
        default_factory=list,
        description="NEW's further files, merged over it in order (docker compose -f a -f b).",
    )
    services: list[ServiceChange] = Field(description="Every service of OLD and NEW.")
    steps: list[Step] = Field(description="Ordered steps; empty when nothing changes.")
    untouched: list[str] = Field(description="Services the rollout never touches.")
    allowed: list[str] = Field(
        default_factory=list,
        description="Protected services the plan may recreate (PlanOptions.allow).",
    )
    variant_label: str = Field(
        default=VARIANT_LABEL,
        description="The label key carrying the variant: the spec's telemetry.label.",
    )

    def changed(self) -> list[ServiceChange]:
        """The services that are not unchanged."""
        return [s for s in self.services if s.change != "unchanged"]


def plan_digest(plan: Plan) -> str:
    """A stable digest of a plan's content, recorded in its journal."""
    canonical = json.dumps(plan.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def is_plan(text: str) -> bool:
    """Whether ``text`` reads back as a plan (what ``tierctl plan -o`` writes, and so may
    replace without being forced)."""
    from pydantic import ValidationError

    try:
        Plan.model_validate_json(text)
    except (ValidationError, ValueError):
        return False
    return True
