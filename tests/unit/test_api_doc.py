"""docs/api.md lists every public name, and no name that is not public."""

from __future__ import annotations

import re
from pathlib import Path

import tierctl

DOC = Path(__file__).parents[2] / "docs" / "api.md"


def _table_names() -> set[str]:
    """The names in the first column of the doc's tables (`name(args)` or `a`, `b`)."""
    names: set[str] = set()
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names |= set(re.findall(r"`([A-Za-z_]+)", first))
    return names


def test_every_public_name_is_documented() -> None:
    assert set(tierctl.__all__) - _table_names() == set()


def test_the_doc_lists_only_public_names() -> None:
    assert _table_names() - set(tierctl.__all__) == set()
