"""How a rollout reports its waits: the protocol the gates call while they poll.

A health gate can wait minutes for an engine to load its model; a variant gate waits for the
collector's next scrape; a soak holds for its window. Each poll reports what it waits for, how
long it has waited and its budget (:meth:`RolloutProgress.waiting`), and the end of the wait
(:meth:`RolloutProgress.waited`), so the operator sees elapsed time instead of a silent
terminal. The library only reports; ``tierctl.progress.RolloutWaits`` draws.
"""

from __future__ import annotations

from typing import Protocol


class RolloutProgress(Protocol):
    """Receives a rollout's waits (the CLI draws them; tests record them)."""

    def waiting(self, service: str, what: str, elapsed_s: float, budget_s: float) -> None:
        """Still waiting on ``service`` for ``what`` (e.g. "/health: HTTP 503"), after
        ``elapsed_s`` of at most ``budget_s`` seconds."""

    def waited(self, service: str, what: str, elapsed_s: float, ok: bool) -> None:
        """The wait for ``what`` ended after ``elapsed_s``: it came (``ok``) or timed out."""


class NoProgress:
    """A :class:`RolloutProgress` that reports nothing (the library's default)."""

    def waiting(self, service: str, what: str, elapsed_s: float, budget_s: float) -> None:
        """Nothing to draw."""

    def waited(self, service: str, what: str, elapsed_s: float, ok: bool) -> None:
        """Nothing to draw."""
