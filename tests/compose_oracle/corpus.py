"""The generated corpus: project ``i`` of seed ``s`` is a function of ``(s, i)`` alone.

Each project is drawn from :func:`tests.compose_oracle.projects.projects` with its own random
stream, seeded by the text ``"s/i/attempt"`` (``random.Random`` hashes a text seed with SHA-512,
so the stream is the same in every process and on every machine). Nothing else feeds the
draw:

- not the earlier projects: Hypothesis's test runner (``@given``) mutates earlier examples
  and skips choice sequences it has seen, so project 1649 depended on all 1,648 before it;
- not the source code that happens to be imported: Hypothesis's own provider mixes in
  literals it collects from every *local* module in ``sys.modules`` (each edit anywhere in
  tierctl, and whether pytest or a script ran it, changed the corpus of ``seed=0``; that is
  why a CI run met projects no local run had met). The provider here leaves them out.

So ``gen-S-I`` reproduces on its own (``scripts/compose_oracle.py --seed S --case I``),
whatever the corpus size or number of workers. It still depends on the strategies' code and
on the Hypothesis version (its draw primitives), which the script prints.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from random import Random
from typing import Any, TypeVar

from hypothesis.control import BuildContext
from hypothesis.errors import StopTest
from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.internal.conjecture.providers import HypothesisProvider
from hypothesis.strategies import SearchStrategy

from tests.compose_oracle.harness import Case, Outcome, run_chunk
from tests.compose_oracle.projects import Project, projects
from tierctl.compose.binary import ComposeBinary

T = TypeVar("T")
_STRATEGY = projects()
#: Fresh streams tried when a draw gives up (a filter that keeps failing, a draw too long);
#: the attempt number is part of the seed, so the retry is the same on every run.
_ATTEMPTS = 50


class _SeededProvider(HypothesisProvider):
    """Hypothesis's provider without the literals it collects from loaded local modules."""

    def _maybe_draw_constant(self, *args: Any, **kwargs: Any) -> None:
        return None


def draw_seeded(strategy: SearchStrategy[T], key: str) -> T:
    """One value of ``strategy`` drawn from the random stream named ``key`` (and ``/attempt``
    when a draw gives up): the same value in every process."""
    for attempt in range(_ATTEMPTS):
        data = ConjectureData(random=Random(f"{key}/{attempt}"), provider=_SeededProvider)
        try:
            with BuildContext(data, wrapped_test=lambda: None):
                value: T = data.draw(strategy)
            return value
        except StopTest:
            continue
    raise RuntimeError(f"nothing drawn from {key} in {_ATTEMPTS} attempts")


def draw_project(seed: int, index: int) -> Project:
    """Project ``index`` of the corpus of ``seed``: the same bytes on every run."""
    return draw_seeded(_STRATEGY, f"{seed}/{index}")


def generate(n: int, seed: int = 0, start: int = 0) -> list[Case]:
    """Projects ``start`` .. ``start + n - 1`` of the corpus of ``seed``."""
    return [Case.of(f"gen-{seed}-{i}", draw_project(seed, i)) for i in range(start, start + n)]


def _draw_and_run(
    binary: ComposeBinary, indices: list[int], seed: int, batch: int, validate: bool = False
) -> list[Outcome]:
    cases = [Case.of(f"gen-{seed}-{i}", draw_project(seed, i)) for i in indices]
    return run_chunk(binary, cases, batch, validate)


def run_generated(
    binary: ComposeBinary,
    n: int,
    *,
    seed: int = 0,
    workers: int = 2,
    batch: int = 40,
    only: list[int] | None = None,
    validate: bool = False,
) -> list[Outcome]:
    """Draw projects ``0 .. n-1`` of ``seed`` (or just the indices ``only``) and compare
    them, both spread over ``workers`` processes; the corpus does not depend on ``workers``.
    ``validate``: also run ``tierctl validate --no-compose-binary`` on every project Compose
    refuses (:attr:`Outcome.validate`)."""
    indices = list(range(n)) if only is None else list(only)
    if workers <= 1 or len(indices) < 2:
        return _draw_and_run(binary, indices, seed, batch, validate)
    shares = [indices[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        parts = pool.map(
            _draw_and_run,
            [binary] * workers,
            shares,
            [seed] * workers,
            [batch] * workers,
            [validate] * workers,
        )
        outcomes = [o for part in parts for o in part]
    order = {f"gen-{seed}-{i}": k for k, i in enumerate(indices)}
    return sorted(outcomes, key=lambda o: order[o.case.name])
