"""No function in src/ is over 100 lines: a longer one mixes several steps that each deserve a
name (and a test). Read with ``ast``, so a nested function counts in its own right and inside
the one holding it."""

from __future__ import annotations

import ast
from pathlib import Path

import tierctl

SRC = Path(tierctl.__file__).parent
#: Lines from ``def`` to the function's last line, decorators and docstring included.
MAX_LINES = 100


def _long_functions(root: Path, limit: int) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name}")
    return found


def test_no_function_is_over_100_lines() -> None:
    assert _long_functions(SRC, MAX_LINES) == []


def test_the_scan_finds_a_long_function(tmp_path: Path) -> None:
    # Guard against a scan that finds nothing and so passes.
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "m.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    assert _long_functions(tmp_path, MAX_LINES) == ["m.py:1 long"]
