"""The generated corpus: ``n`` projects drawn by Hypothesis from one seed (reproducible)."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as with_seed

from tests.compose_oracle.harness import Case, Outcome, run_chunk
from tests.compose_oracle.projects import Project, projects
from tierctl.compose.binary import ComposeBinary


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


def _draw_and_run(binary: ComposeBinary, n: int, seed: int, batch: int) -> list[Outcome]:
    cases = generate(n, seed)
    for case in cases:
        case.name = f"gen-{seed}-{case.name.rsplit('-', 1)[1]}"
    return run_chunk(binary, cases, batch)


def run_generated(
    binary: ComposeBinary, n: int, *, seed: int = 0, workers: int = 2, batch: int = 40
) -> list[Outcome]:
    """Draw ``n`` projects and compare them, both spread over ``workers`` processes (each
    draws its own share from its own seed, so the corpus is the same on every run)."""
    shares = [n // workers + (1 if i < n % workers else 0) for i in range(workers)]
    seeds = [seed * 1000 + i for i in range(workers)]
    if workers == 1:
        return _draw_and_run(binary, n, seeds[0], batch)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        parts = pool.map(_draw_and_run, [binary] * workers, shares, seeds, [batch] * workers)
        return [o for part in parts for o in part]
