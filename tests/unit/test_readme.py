"""The README's first commands are ones that work from a checkout.

tierctl is not on a package index: ``pip install 'tierctl[all]'`` finds nothing, so a newcomer
who copies the README's first install line gets an error. The first code block must install
from the checkout, and no install advice anywhere (README, docs, messages) names the package
as if an index had it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
#: ``pip install tierctl``, ``pip install 'tierctl[all]'``, ``pipx install "tierctl[x]"``.
INDEX_INSTALL = re.compile(r"pipx? install\s+['\"]?tierctl\b")


def _blocks(text: str) -> list[str]:
    return re.findall(r"```(?:sh|console|bash)\n(.*?)```", text, flags=re.S)


def test_the_first_commands_of_the_readme_work_from_a_checkout() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = _blocks(text)[0]
    assert "make demo" in first or "pip install -e" in first
    assert not INDEX_INSTALL.search(first)


def test_no_install_advice_names_the_package_as_if_an_index_had_it() -> None:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "src" / "tierctl").rglob("*.py"))
    found = []
    for path in files:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            # Saying that the command does not work is allowed; advising it is not.
            if INDEX_INSTALL.search(line) and "finds nothing" not in line:
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []
