"""The write-ahead journal of a rollout: one JSON line per event, fsynced before moving on.

A step is journaled ``begin`` before its action and ``done`` after its gates pass, so after a
crash or Ctrl-C ``--resume`` skips every ``done`` step and re-runs a step that began but did not
finish (every step is safe to repeat: a scoped down, or a recreate of one service). A step
that failed (its gates or its apply) and was rolled back ends the journal: resuming past it is
refused, since the plan's premise did not hold. Secret values handed to the journal are masked before they are
written; nothing in it is meant to carry a secret in the first place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tierctl.credentials import mask, mask_tree
from tierctl.errors import InputError, Location
from tierctl.readers import Limits, read_text

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class JournalState:
    """What a journal says has happened.

    Attributes:
        done: Ids of finished steps.
        begun: Ids of steps that began but did not finish or fail.
        rolled_back: Id of the step that failed (a gate or its apply) and was rolled back.
        completed: Whether the whole plan finished.
    """

    done: frozenset[str]
    begun: frozenset[str]
    rolled_back: str | None
    completed: bool
    #: A step that failed (its apply, or a gate) whose rollback never finished: the rollout
    #: was killed during the rollback, or the rollback failed. Its service's state is unknown.
    unfinished_rollback: str | None = None
    #: Step id -> the proxy worker it took out and did not put back (an interrupted run).
    out_of_proxy: Mapping[str, str] = field(default_factory=dict)
    #: What failed before the rollback of ``rolled_back``: ``gate-failed`` or ``failed``.
    rolled_back_after: str | None = None


class Journal:
    """An append-only, fsynced JSON-lines journal tied to one plan digest."""

    def __init__(
        self,
        path: Path,
        plan_digest: str,
        *,
        secrets: Iterable[str] = (),
        clock: Clock | None = None,
    ) -> None:
        """Open a journal.

        Args:
            path: The journal file.
            plan_digest: The digest of the plan it records.
            secrets: Values to mask if they ever reach a journal line.
            clock: Injected clock for timestamps.
        """
        self.path = path
        self.plan_digest = plan_digest
        self._secrets = tuple(s for s in secrets if s)
        self._clock = clock or (lambda: datetime.now(UTC))

    def exists(self) -> bool:
        """Whether the journal file exists."""
        return self.path.exists()

    def read(self) -> JournalState:
        """Read the journal back.

        Raises:
            InputError: The journal belongs to another plan or is not a journal.
        """
        done: set[str] = set()
        begun: set[str] = set()
        rolled_back: str | None = None
        rolled_back_after: str | None = None
        completed = False
        failed: dict[str, str] = {}  # step -> "gate-failed" | "failed" | "rollback-failed"
        out_of_proxy: dict[str, str] = {}
        lines = read_text(self.path, what="journal", limits=Limits.trace()).splitlines()
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                # A torn last line from a crash mid-write: everything before it stands.
                if lineno == len(lines):
                    break
                raise InputError(
                    "journal line is not JSON",
                    location=Location(file=str(self.path), line=lineno),
                    rule="a journal is JSON lines written by tierctl rollout",
                    fix="point `journal` at the rollout's journal",
                    params=("journal",),
                ) from None
            if rec.get("plan") != self.plan_digest:
                raise InputError(
                    "the journal records a different plan",
                    location=Location(file=str(self.path), line=lineno),
                    rule="`resume` continues the plan its journal was written for",
                    value=rec.get("plan"),
                    fix="resume with the same plan file, or start a new journal",
                    params=("resume",),
                )
            event, step = rec.get("event"), rec.get("step")
            if event == "begin":
                begun.add(step)
            elif event == "done":
                done.add(step)
                begun.discard(step)
            elif event in ("gate-failed", "failed", "rollback-failed"):
                failed[step] = event if event != "failed" else failed.get(step, event)
            elif event == "unreachable":
                # The host stopped answering (its agent or the network): the step's outcome is
                # unknown, not failed; it stays begun, so a resume re-runs it.
                failed.pop(step, None)
            elif event == "rolled-back":
                # A failed gate or a failed apply, rolled back: the plan's premise did not hold
                # (docs/rollout.md), so the journal is never resumed past it.
                cause = failed.pop(step, None)
                if cause is not None:
                    rolled_back, rolled_back_after = step, cause
                begun.discard(step)
            elif event == "completed":
                completed = True
            elif event == "proxy-drained":
                out_of_proxy[step] = str(rec.get("worker"))
            elif event == "proxy-restored":
                out_of_proxy.pop(step, None)
        unfinished = next(iter(failed), None)
        return JournalState(
            frozenset(done),
            frozenset(begun),
            rolled_back,
            completed,
            unfinished,
            out_of_proxy,
            rolled_back_after,
        )

    def write(self, event: str, step: str | None = None, **fields: Any) -> None:
        """Append one event and fsync it before returning."""
        rec: dict[str, Any] = {
            "at": self._clock().isoformat(),
            "plan": self.plan_digest,
            "event": event,
        }
        if step is not None:
            rec["step"] = step
        rec.update(mask_tree(fields, self._secrets))
        line = mask(json.dumps(rec, sort_keys=True), self._secrets)
        new = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        if new:
            # The file's directory entry must survive a crash too.
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
