"""The differential harness: tierctl's reading of a compose project vs the real Compose's.

Both sides read the same files in the same folder with the same environment and profiles:
tierctl through :func:`tierctl.compose.project.project_config` (what ``tierctl compose
config`` prints), Compose through ``docker compose config --format json``
(:mod:`tierctl.compose.binary`). A project Compose accepts must read to the same services and
volumes; a project Compose refuses must be refused by tierctl, with a located message.

The binary takes ~50 ms to start, so projects tierctl accepts share one call: each project's
names carry its own prefix (:mod:`tests.compose_oracle.projects`), so their services never
meet, and the call's output is split back by prefix. A call that fails is split in halves
until the project Compose refuses is found. Calls run in a small thread pool (the binary is
its own process).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.compose_oracle.projects import ENVIRON, PROFILES, PROJECT_NAME, Project
from tierctl.compose.binary import ComposeBinary, compose_config
from tierctl.compose.crosscheck import differences, value_at
from tierctl.compose.project import ProjectOptions, json_form, project_config
from tierctl.contracts.schema import refuse_invalid
from tierctl.errors import ComposeInputError, TierctlError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "compose_oracle"


def environ() -> dict[str, str]:
    """The whole environment both sides read projects in (no user variables leak in)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/root", **ENVIRON}


@dataclass
class Case:
    """One project to compare: its files in ``-f`` order, profiles and environment."""

    name: str
    project: Project
    profiles: tuple[str, ...] = PROFILES
    env: dict[str, str] = field(default_factory=environ)
    #: ``-p``; None: Compose picks the name (``name:``, ``COMPOSE_PROJECT_NAME``, the folder).
    project_name: str | None = PROJECT_NAME

    @classmethod
    def of(cls, name: str, project: Project) -> Case:
        """A generated project with the inputs it draws (``-p``, profiles, variables)."""
        profiles = PROFILES if project.profiles is None else project.profiles
        env = {**environ(), **project.env}
        return cls(name, project, profiles, env, project.project_name)


@dataclass
class Outcome:
    """How one project compared: agree, or the area that differs and both readings."""

    case: Case
    agree: bool
    area: str
    detail: str = ""
    #: On a project Compose refuses, when asked: how ``tierctl validate --no-compose-binary``
    #: took it (:func:`validate_verdict`); None otherwise.
    validate: str | None = None
    #: Compose's refusal, with :attr:`validate`.
    refusal: str = ""


def _select(config: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The part of a project's reading that belongs to the names with ``prefix``."""
    return {
        "name": config.get("name"),
        "services": {
            k: v for k, v in (config.get("services") or {}).items() if k.startswith(prefix)
        },
        **{
            kind: {k: v for k, v in (config.get(kind) or {}).items() if k.startswith(prefix)}
            for kind in ("volumes", "networks", "secrets", "configs")
        },
        # The project's top-level x-* extensions (anchors' homes): printed as Compose prints them.
        # (A kept fixture's reading is already selected: its "extensions" are kept as they are.)
        "extensions": {
            **(config.get("extensions") or {}),
            **{k: v for k, v in config.items() if str(k).startswith(f"x-{prefix}")},
        },
    }


def _area(path: tuple[str, ...]) -> str:
    if len(path) >= 3 and path[0] == "services":
        return path[2]
    return ".".join(path[:1]) or "(top)"


def write_case(folder: Path, case: Case, prefix: str) -> list[Path]:
    """Write the project's files into ``folder`` (or its subfolder the project names) with
    ``prefix``; its ``-f`` paths."""
    files, order = case.project.render(prefix)
    if case.project.folder is not None:
        folder = folder / case.project.folder
        folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return [folder / f for f in order]


def read_tierctl(paths: Sequence[Path], folder: Path, case: Case) -> dict[str, Any] | TierctlError:
    """tierctl's reading (what ``tierctl compose config`` prints), or its refusal."""
    options = ProjectOptions(
        profiles=case.profiles,
        project_directory=str(folder),
        project_name=case.project_name,
        environ=case.env,
    )
    try:
        return json_form(project_config(paths, options, check=refuse_invalid))
    except TierctlError as exc:
        return exc
    except Exception as exc:  # a crash is a finding: report it, keep comparing the rest
        return TierctlError(f"tierctl crashed: {type(exc).__name__}: {exc}")


def read_compose(
    binary: ComposeBinary, paths: Sequence[Path], folder: Path, cases: Sequence[Case]
) -> dict[str, Any] | ComposeInputError:
    """Compose's reading of one or several (prefixed) projects together, or its refusal."""
    try:
        return compose_config(
            paths,
            binary=binary,
            profiles=cases[0].profiles,
            project_name=cases[0].project_name,
            project_directory=folder,
            # Go's collector off: a short-lived `config` spends a fifth of its CPU in it
            # (measured); no project reads the variable.
            env={**cases[0].env, "GOGC": "off"},
        )
    except ComposeInputError as exc:
        return exc


def _located(exc: TierctlError) -> bool:
    loc = exc.location
    return loc is not None and bool(loc.file) and (loc.line is not None or bool(loc.path))


def compare(case: Case, mine: dict[str, Any] | TierctlError, theirs: Any, prefix: str) -> Outcome:
    """One project's two readings (each a config or a refusal) compared on its names."""
    if isinstance(theirs, ComposeInputError):
        if not isinstance(mine, TierctlError):
            return Outcome(case, False, "refused by compose only", theirs.message)
        if not _located(mine):
            return Outcome(case, False, "refusal not located", mine.format())
        return Outcome(case, True, "refused by both")
    if isinstance(mine, TierctlError):
        path = (mine.location.path or "") if mine.location else ""
        area = path.split(".")[2].split("[")[0] if path.count(".") >= 2 else path or "?"
        return Outcome(case, False, f"refused by tierctl only: {area}", mine.format())
    left, right = _select(mine, prefix), _select(theirs, prefix)
    where = next(differences(left, right), None)
    if where is None:
        return Outcome(case, True, "accepted by both")
    detail = f"at {'.'.join(where)}: tierctl {json.dumps(value_at(left, where))} compose {json.dumps(value_at(right, where))}"
    return Outcome(case, False, _area(where), detail)


@dataclass
class _Entry:
    case: Case
    prefix: str
    folder: Path
    paths: list[Path]
    mine: dict[str, Any] | TierctlError
    index: int = 0


def combine(texts: Sequence[str]) -> str:
    """Several generated files (disjoint names) as one: their ``services:`` and ``volumes:``
    blocks joined, their ``include`` lists joined, other top-level keys kept. Compose's cost
    is per file (it validates the merged project after each), so one file of 40 services
    reads ~10x faster than 40 files; the meaning is the same because no name is shared."""
    blocks: dict[str, list[str]] = {}
    includes: list[Any] = []
    names: set[str] = set()  # a project's `name:`: the projects of one call share it
    for text in texts:
        key = ""
        for line in text.splitlines():
            if not line.strip() or line.startswith("#"):
                continue  # blank lines and comments (a file without a document) add nothing
            if not line[0].isspace():
                key, _, rest = line.partition(":")
                if key == "include":
                    includes.extend(json.loads(rest))
                elif key == "name":
                    names.add(line)
                elif rest.strip():
                    blocks.setdefault(line, [])
                    key = line
                else:
                    blocks.setdefault(key, [])
                continue
            blocks[key].append(line)
    out = sorted(names)
    out += [f"include: {json.dumps(includes)}"] if includes else []
    # Anchors (in x- keys) come first: an alias may only name an anchor defined above it.
    for key in sorted(blocks, key=lambda k: not k.startswith("x-")):
        out.append(key if key.startswith("x-") else f"{key}:")
        out.extend(blocks[key])
    return "\n".join(out) + "\n"


def _group_files(group: list[_Entry]) -> list[Path]:
    """The group's ``-f`` files: the i-th file of every project combined into one."""
    folder = group[0].folder
    out = []
    for i in range(max(len(e.paths) for e in group)):
        texts = [e.paths[i].read_text(encoding="utf-8") for e in group if len(e.paths) > i]
        path = folder / f"{group[0].prefix}{len(group)}-batch{i}.yml"
        path.write_text(combine(texts), encoding="utf-8")
        out.append(path)
    return out


def _run_group(binary: ComposeBinary, group: list[_Entry], validate: bool) -> list[Outcome]:
    """One Compose call over several projects tierctl accepted; halves on a refusal."""
    paths = _group_files(group) if len(group) > 1 else group[0].paths
    theirs = read_compose(binary, paths, group[0].folder, [e.case for e in group])
    if isinstance(theirs, ComposeInputError) and len(group) > 1:
        half = len(group) // 2
        return _run_group(binary, group[:half], validate) + _run_group(
            binary, group[half:], validate
        )
    outcomes = [compare(e.case, e.mine, theirs, e.prefix) for e in group]
    if validate and isinstance(theirs, ComposeInputError):
        for outcome, entry in zip(outcomes, group, strict=True):
            outcome.validate = validate_verdict(entry.case, entry.paths, theirs)
            outcome.refusal = theirs.message
    return outcomes


#: :func:`validate_verdict`'s answers.
VALIDATE_REFUSES = "refuses"  # exit 2, or a TC007 violation ("Compose would refuse ...")
VALIDATE_OTHER = "other violation"  # exit 1, but for another rule (TC006, TC004): a miss
VALIDATE_ACCEPTS = "accepts"  # exit 0: a miss
VALIDATE_EXEMPT = "exempt"  # Compose refused what validate cannot see: documented


def validate_verdict(case: Case, paths: Sequence[Path], theirs: ComposeInputError) -> str:
    """How ``tierctl validate --no-compose-binary FILES`` (no spec) takes a project Compose
    refuses, run in-process in the case's environment and profiles. Exempt: an unset
    required variable (``${VAR:?}``: validate runs where the secrets are not,
    docs/compose.md) and a ``-p`` Compose refuses (validate takes no project name)."""
    from tierctl.cli.profiles import chosen_profiles
    from tierctl.contracts.crosscheck import ComposeCheck
    from tierctl.contracts.schema import unset_required
    from tierctl.contracts.standalone import validate_files

    given_p = case.project_name not in (None, PROJECT_NAME)
    if unset_required(theirs.message) or (given_p and "invalid project name" in theirs.message):
        return VALIDATE_EXEMPT
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(case.env)
    try:
        report = validate_files(
            paths,
            profiles=chosen_profiles(case.profiles),
            compose_check=ComposeCheck(enabled=False),
        )
    except TierctlError:
        return VALIDATE_REFUSES
    except Exception:  # a crash is exit 1 with a traceback: not a refusal
        return VALIDATE_OTHER
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if any(v.rule == "TC007" for v in report.violations):
        return VALIDATE_REFUSES
    return VALIDATE_OTHER if report.violations else VALIDATE_ACCEPTS


def run_cases(
    binary: ComposeBinary, cases: Sequence[Case], *, batch: int = 40, workers: int = 2
) -> list[Outcome]:
    """Compare every case, in ``workers`` processes; accepted ones share Compose calls of
    ``batch`` projects, their files combined (:func:`combine`)."""
    if workers <= 1 or len(cases) < 2 * batch:
        return run_chunk(binary, list(cases), batch)
    size = -(-len(cases) // workers)
    chunks = [list(cases[i : i + size]) for i in range(0, len(cases), size)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        parts = pool.map(run_chunk, [binary] * len(chunks), chunks, [batch] * len(chunks))
        return [o for part in parts for o in part]


def run_chunk(
    binary: ComposeBinary, cases: list[Case], batch: int = 40, validate: bool = False
) -> list[Outcome]:
    """Compare ``cases`` in this process, in a folder of their own.

    Projects with ``{P}`` names share calls in one folder, ``batch`` at a time, when they
    are read with the same ``-p``, profiles, variables and ``name:``
    (:meth:`Project.options_key`); others run alone, each in its own folder: restated
    tables (their names are fixed), projects with a ``.env`` or a folder name of their own,
    and every project tierctl refuses (Compose stops at the first refusal of a call)."""
    with tempfile.TemporaryDirectory(prefix="compose-oracle-") as tmp:
        shared = Path(tmp)
        groups: dict[Any, list[list[_Entry]]] = {}
        singles: list[_Entry] = []
        for i, case in enumerate(cases):
            named = any("{P}" in t for t in case.project.files.values())
            prefix = f"c{i}_" if named else ""
            folder = shared
            if not named or case.project.solo:
                folder = shared / f"case{i}"
                folder.mkdir()
            paths = write_case(folder, case, prefix)
            if case.project.folder is not None:
                folder = folder / case.project.folder
            entry = _Entry(case, prefix, folder, paths, read_tierctl(paths, folder, case), i)
            if isinstance(entry.mine, TierctlError) or not named or case.project.solo:
                singles.append(entry)
                continue
            key = json.dumps(case.project.options_key())
            chunks = groups.setdefault(key, [[]])
            if len(chunks[-1]) >= batch:
                chunks.append([])
            chunks[-1].append(entry)
        ordered: list[tuple[int, Outcome]] = []
        for group in [g for chunks in groups.values() for g in chunks if g] + [
            [s] for s in singles
        ]:
            found = _run_group(binary, group, validate)
            ordered.extend((e.index, o) for e, o in zip(group, found, strict=True))
    # In the cases' order, whatever calls they shared.
    return [o for _, o in sorted(ordered, key=lambda pair: pair[0])]


@dataclass
class Counts:
    """The figures the script prints: projects, agreements, disagreements by area."""

    projects: int
    agree: int
    accepted_by_both: int
    refused_by_both: int
    disagree: Counter[str]
    features: Counter[str]


def count(outcomes: Sequence[Outcome]) -> Counts:
    """The counts of a run."""
    return Counts(
        projects=len(outcomes),
        agree=sum(o.agree for o in outcomes),
        accepted_by_both=sum(o.area == "accepted by both" for o in outcomes),
        refused_by_both=sum(o.area == "refused by both" for o in outcomes),
        disagree=Counter(o.area for o in outcomes if not o.agree),
        features=Counter(f for o in outcomes for f in o.case.project.features),
    )


# --- fixtures ----------------------------------------------------------------------------


def save_fixture(binary: ComposeBinary, outcome: Outcome, root: Path = FIXTURES) -> Path:
    """Keep a disagreement as a regression fixture: its files, and Compose's reading of them
    (paths under the folder written as ``{DIR}``), so the suite replays it without the binary."""
    root.mkdir(parents=True, exist_ok=True)
    number = 1 + max((int(p.name) for p in root.iterdir() if p.name.isdigit()), default=0)
    folder = root / f"{number:03d}"
    folder.mkdir()
    case = outcome.case
    paths = write_case(folder, case, "")
    root = folder / case.project.folder if case.project.folder is not None else folder
    theirs = read_compose(binary, paths, root, [case])
    expected: dict[str, Any]
    if isinstance(theirs, ComposeInputError):
        expected = {"refused": theirs.message.replace(str(folder), "{DIR}")}
    else:
        text = json.dumps(_select(theirs, "")).replace(str(root), "{DIR}")
        expected = {"config": json.loads(text)}
    meta = {
        "order": [p.name for p in paths],
        "project_name": case.project_name,
        "folder": case.project.folder,
        "profiles": list(case.profiles),
        "environ": {k: v for k, v in case.env.items() if k not in ("PATH", "HOME")},
        "features": case.project.features,
        "found": {"area": outcome.area, "detail": outcome.detail},
        "compose": expected,
    }
    (folder / "oracle.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return folder


def fixture_dirs(root: Path = FIXTURES) -> list[Path]:
    """Every kept fixture, in order."""
    return (
        sorted(p for p in root.iterdir() if (p / "oracle.json").is_file()) if root.is_dir() else []
    )


def replay(folder: Path) -> Outcome:
    """A kept fixture read by tierctl and compared with the Compose reading it keeps."""
    meta = json.loads((folder / "oracle.json").read_text(encoding="utf-8"))
    sub = meta.get("folder")
    root = folder / sub if sub is not None else folder
    files = {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "oracle.json"
    }
    case = Case(
        folder.name,
        Project(files=files, order=meta["order"], features=meta["features"], folder=sub),
        profiles=tuple(meta["profiles"]),
        env={**environ(), **meta["environ"]},
        project_name=meta.get("project_name", PROJECT_NAME),
    )
    mine = read_tierctl([root / f for f in meta["order"]], root, case)
    expected = meta["compose"]
    theirs: Any
    if "refused" in expected:
        theirs = ComposeInputError(expected["refused"])
    else:
        theirs = json.loads(json.dumps(expected["config"]).replace("{DIR}", str(root)))
        # Kept before the project's name was compared: the name not compared.
        theirs.setdefault("name", mine.get("name") if isinstance(mine, dict) else None)
        if isinstance(mine, dict):
            # Kept before networks, secrets and configs were compared: those not compared.
            theirs.update(
                {k: mine.get(k) for k in ("networks", "secrets", "configs") if k not in theirs}
            )
    return compare(case, mine, theirs, "")


def iter_repo_files(root: Path) -> Iterator[list[Path]]:
    """Every compose project in the repository (examples, corpus), as ``-f`` lists."""
    for path in sorted(root.glob("examples/*/compose*.y*ml")):
        yield [path]
    corpus = root / "tests" / "unit" / "compose" / "corpus"
    for path in sorted(corpus.glob("*.yaml")):
        if ".override." in path.name:
            continue
        override = path.with_name(path.stem + ".override.yaml")
        yield [path, override] if override.exists() else [path]
    for path in sorted(corpus.glob("*/compose*.yaml")):
        yield [path]
