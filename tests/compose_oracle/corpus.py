"""The generated corpus: ``n`` projects drawn by Hypothesis from one seed (reproducible)."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as with_seed

from tests.compose_oracle.harness import Case
from tests.compose_oracle.projects import Project, projects


def generate(n: int, seed: int = 0) -> list[Case]:
    """``n`` generated projects (Hypothesis, generation phase only, from ``seed``)."""
    drawn: list[Project] = []

    @with_seed(seed)
    @settings(
        max_examples=n,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(projects())
    def collect(project: Project) -> None:
        drawn.append(project)

    collect()
    return [Case(f"gen-{seed}-{i}", p) for i, p in enumerate(drawn)]
