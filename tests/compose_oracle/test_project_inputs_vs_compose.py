"""What a project reads besides its compose files, against the real Compose v2.40.3.

Issue #38/#42's classes: dotenv syntax (the project's ``.env`` and a service's ``env_file``:
quotes, escapes, bare keys, ``export``, a BOM, YAML-style ``KEY: v``), project names (``-p``,
``COMPOSE_PROJECT_NAME``, ``name:``, the folder), ``COMPOSE_PROFILES`` from the environment
or ``.env``, an override's ``services: {a: null}``, long mounts and devices without a
``target``. Each case is read by ``tierctl compose config``'s reader and by the binary in the
same folder and environment: the same services and name, or both refuse (tierctl located).

The dotenv texts are drawn from a fixed seed (:func:`dotenv_texts`), the same on every run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tierctl.compose.binary import ComposeBinary, compose_config
from tierctl.compose.project import ProjectOptions, json_form, project_config
from tierctl.contracts.schema import refuse_invalid
from tierctl.errors import TierctlError

BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/root", "SET": "value", "EMPTY": ""}


@dataclass
class Inputs:
    """One project: its files (name -> bytes), ``-f`` order, and what else Compose takes."""

    files: dict[str, bytes]
    order: list[str] = field(default_factory=lambda: ["compose.yaml"])
    env: dict[str, str] = field(default_factory=dict)
    project_name: str | None = None
    profiles: tuple[str, ...] = ()


def _both(binary: ComposeBinary, folder: Path, case: Inputs) -> tuple[Any, Any]:
    for name, data in case.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    paths = [folder / f for f in case.order]
    env = {**BASE_ENV, **case.env}
    try:
        theirs: Any = compose_config(
            paths,
            binary=binary,
            profiles=case.profiles,
            project_name=case.project_name,
            project_directory=folder,
            env=env,
        )
        theirs = {"name": theirs["name"], "services": theirs.get("services") or {}}
    except TierctlError as exc:
        theirs = exc
    options = ProjectOptions(
        profiles=case.profiles,
        project_directory=str(folder),
        project_name=case.project_name,
        environ=env,
    )
    try:
        mine: Any = json_form(project_config(paths, options, check=refuse_invalid))
        mine = {"name": mine["name"], "services": mine.get("services") or {}}
    except TierctlError as exc:
        mine = exc
    return mine, theirs


def _agree(mine: Any, theirs: Any) -> str | None:
    """None when both read the same or both refuse (tierctl with a location); else why not."""
    if isinstance(theirs, TierctlError):
        if not isinstance(mine, TierctlError):
            return f"refused by compose only: {theirs.message}"
        loc = mine.location
        if loc is None or not loc.file or (loc.line is None and not loc.path):
            return f"tierctl's refusal is not located: {mine.format()}"
        return None
    if isinstance(mine, TierctlError):
        return f"refused by tierctl only: {mine.format()}"
    return None if mine == theirs else f"tierctl {mine}\ncompose {theirs}"


# --- dotenv ------------------------------------------------------------------------------

_KEYS = ["A", "B_1", "c.d", "e-f", "G[0]", "SET", "EMPTY", "UNSET", "H I", "J$", "\ufeffK", "Ü"]
_VALUES = [
    "plain",
    "two words",
    "x #comment",
    "x#no-comment",
    "'single'",
    "'a\\'b'",
    "'multi\nline'",
    '"double"',
    '"a\\"b"',
    '"\\$SET"',
    '"\\n\\t\\r\\\\\\a\\q"',
    '"\\0101\\012\\0"',
    '"${SET}-${UNSET:-d}"',
    "${SET}",
    "$SET$$",
    "${A}",
    '"unterminated',
    "'unterminated",
    '"x" tail',
    "\ufeffbom-in-value",
    "${UNSET:?need it}",
    "${",
    "",
]
_PREFIXES = ["", "export ", "export\t", "  ", "\t"]
_SEPARATORS = ["=", " = ", ": ", "="]


def dotenv_texts(count: int, seed: int = 38) -> list[str]:
    """``count`` dotenv texts of 1-5 statements drawn from the fragments above."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(count):
        lines = []
        for _ in range(rng.randint(1, 5)):
            roll = rng.random()
            if roll < 0.1:
                lines.append(rng.choice(["# comment", "", "  ", "export =x", "\ufeffX=1"]))
            elif roll < 0.2:
                lines.append(rng.choice(_KEYS))  # a bare key
            else:
                key, value = rng.choice(_KEYS), rng.choice(_VALUES)
                lines.append(rng.choice(_PREFIXES) + key + rng.choice(_SEPARATORS) + value)
        end = rng.choice(["\n", "\n", "", "\r\n"])
        out.append(end.join(lines) + end)
    return out


_HAND = [
    "export ",
    "A='a\\'b'\n",
    'A="\\$X"\n',
    "KEY\n",
    "SET\n",
    "KEY",
    "export =x\n",
    'A="x\n',
    "A='x\n",
    "\ufeffA=1\n",
    "A=1\n\ufeffB=2\n",
    'A="x" junk\nB=1\n',
    "A=1\nA\n",
    "A: 1\n",
    "A B=1\n",
]


_ALPHABET = [
    "=", ":", "#", " #", "'", '"', "\\", "$", "${", "}", "{", " ", "\t", "\n", "\r\n",
    "export ", "A", "B", "_", ".", "-", "[", "]", "\ufeff", "é", "1", "SET", "${SET}", "$$",
    "\\n", "\\$", ":-", "?", "+",
]  # fmt: skip


def raw_dotenv_texts(count: int, seed: int = 42) -> list[str]:
    """``count`` texts of 1-14 fragments of dotenv syntax in any order (found `export ` at
    the end of a file, which Compose refuses: "zero length string")."""
    rng = random.Random(seed)
    return ["".join(rng.choices(_ALPHABET, k=rng.randint(1, 14))) for _ in range(count)]


def _dotenv_compose(text: str) -> bytes:
    names = ["A", "B", "B_1", "KEY", "SET", "EMPTY", "X", "K", "G", "H", "c.d"]
    env = "".join(f"      V_{i}: ${{{n}-unset}}\n" for i, n in enumerate(names))
    return f"services:\n  a:\n    image: x\n    environment:\n{env}".encode()


def _dotenv_cases() -> list[tuple[str, Inputs]]:
    cases: list[tuple[str, Inputs]] = []
    for i, text in enumerate([*_HAND, *dotenv_texts(150), *raw_dotenv_texts(100)]):
        data = text.encode()
        cases.append((f"dotenv-{i}", Inputs({".env": data, "compose.yaml": _dotenv_compose(text)})))
        env_file = b"services:\n  a:\n    image: x\n    env_file: e.env\n    environment: {S: s}\n"
        cases.append((f"env_file-{i}", Inputs({"e.env": data, "compose.yaml": env_file})))
    return cases


@pytest.mark.parametrize(
    ("name", "case"), _dotenv_cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_dotenv_reads_as_compose_reads_it(
    compose_binary: ComposeBinary, tmp_path: Path, name: str, case: Inputs
) -> None:
    mine, theirs = _both(compose_binary, tmp_path, case)
    assert _agree(mine, theirs) is None, (name, case.files, _agree(mine, theirs))


# --- project names, profiles, overrides, mount targets --------------------------------------

_ONE = b"services:\n  a:\n    image: x\n"
_PROFILED = (
    b"services:\n  a:\n    image: x\n  b:\n    image: x\n    profiles: [blue]\n"
    b"  c:\n    image: x\n    profiles: [red]\n"
)


def _named(name: str) -> Inputs:
    return Inputs({"compose.yaml": f"name: {name}\n".encode() + _ONE})


_PROJECT_CASES: dict[str, Inputs] = {
    **{
        f"-p {n!r}": Inputs({"compose.yaml": _ONE}, project_name=n)
        for n in ["Abc", "a b", "_a", "a.b", "-a", "a_", "1a", "ab-_9"]
    },
    **{
        f"name: {n}": _named(n)
        for n in ['"_"', "_x", "Abc", '"-"', '"${UNSET-}"', '""', '"A B"', '"${SET}"']
    },
    "COMPOSE_PROJECT_NAME=Bad": Inputs({"compose.yaml": _ONE}, env={"COMPOSE_PROJECT_NAME": "Bad"}),
    "COMPOSE_PROJECT_NAME in .env": Inputs(
        {"compose.yaml": _ONE, ".env": b"COMPOSE_PROJECT_NAME=from_env\n"}
    ),
    "folder _": Inputs({"_/compose.yaml": _ONE}, order=["_/compose.yaml"]),
    "COMPOSE_PROFILES": Inputs({"compose.yaml": _PROFILED}, env={"COMPOSE_PROFILES": "blue, red"}),
    "COMPOSE_PROFILES under --profile": Inputs(
        {"compose.yaml": _PROFILED}, env={"COMPOSE_PROFILES": "blue"}, profiles=("red",)
    ),
    "COMPOSE_PROFILES in .env": Inputs(
        {"compose.yaml": _PROFILED, ".env": b"COMPOSE_PROFILES=red\n"}
    ),
    "override a: null": Inputs(
        {"compose.yaml": _ONE + b"    environment: {A: 1}\n", "o.yaml": b"services:\n  a: null\n"},
        order=["compose.yaml", "o.yaml"],
    ),
    "override b: null, no b": Inputs(
        {"compose.yaml": _ONE, "o.yaml": b"services:\n  b: null\n"},
        order=["compose.yaml", "o.yaml"],
    ),
    "a: null first": Inputs(
        {"compose.yaml": _ONE, "o.yaml": b"services:\n  a: null\n"},
        order=["o.yaml", "compose.yaml"],
    ),
    "mount without target in an extended file": Inputs(
        {
            "compose.yaml": b"services:\n  a:\n    image: x\n    extends: {file: b.yaml, service: b}\n",
            "b.yaml": b"services:\n  b:\n    image: x\n    volumes: [{type: bind, source: .}]\n",
        }
    ),
    **{
        f"mount {i}": Inputs({"compose.yaml": _ONE + body})
        for i, body in enumerate(
            [
                b"    volumes:\n      - type: bind\n        source: ./d\n",
                b"    volumes:\n      - {type: volume, target: 5}\n",
                b"    volumes:\n      - {type: tmpfs}\n",
                b"    volumes:\n      - {type: bind, source: ., target: /x}\n      - {type: bind, source: ./e}\n",
                b"    devices:\n      - {source: /dev/x}\n",
                b"    volumes:\n      - {type: bind, source: ., target: /x}\n",
                # Compose cleans every target with Go's path.Clean.
                b'    volumes:\n      - {type: bind, source: ., target: ""}\n',
                b"    volumes:\n      - {type: bind, source: ., target: //x//../y/}\n",
                b"    volumes:\n      - {type: bind, source: ., target: /..}\n",
                b"    volumes:\n      - ./d:/x/../y/:ro\n",
            ]
        )
    },
}


@pytest.mark.parametrize("name", list(_PROJECT_CASES))
def test_project_inputs_read_as_compose_reads_them(
    compose_binary: ComposeBinary, tmp_path: Path, name: str
) -> None:
    case = _PROJECT_CASES[name]
    mine, theirs = _both(compose_binary, tmp_path, case)
    assert _agree(mine, theirs) is None, (name, _agree(mine, theirs))
