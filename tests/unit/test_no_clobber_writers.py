"""Writers of several files check them all before writing any, and replace only their own.

Reproducer (#22): ``bench --out DIR`` wrote results.json before it found that DIR's report.md
was someone else's file, so the refusal left a new results.json behind; the quality lane's
quality.json/quality.md and ``catalog build --out`` replaced any file of that name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.bench.execute import _write
from tierctl.bench.quality.lane import QualityResult
from tierctl.bench.quality.report import write_quality
from tierctl.cli.catalog import _is_catalog
from tierctl.errors import InputError
from tierctl.paths import write_owned


def test_check_only_refuses_as_a_write_would_and_writes_nothing(tmp_path: Path) -> None:
    foreign = tmp_path / "notes.txt"
    foreign.write_text("mine\n")
    with pytest.raises(InputError, match="did not write"):
        write_owned(foreign, "new\n", ours=lambda _: False, check_only=True)
    fresh = tmp_path / "fresh.txt"
    assert write_owned(fresh, "new\n", ours=lambda _: False, check_only=True) is None
    assert not fresh.exists()
    assert foreign.read_text() == "mine\n"


def test_bench_output_refused_on_the_report_leaves_no_new_results_file(tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text("# my own notes\n")
    with pytest.raises(InputError, match=r"report\.md|did not write"):
        _write(tmp_path, {"kind": "x"}, "# tierctl bench run\n")
    assert not (tmp_path / "results.json").exists()
    assert (tmp_path / "report.md").read_text() == "# my own notes\n"


def _quality() -> QualityResult:
    return QualityResult(
        a_url="http://127.0.0.1:1",
        b_url="http://127.0.0.1:2",
        engines={"A": "vllm", "B": "vllm"},
        floor_measured=False,
        lanes=(),
        passes=("A", "B"),
    )


def test_quality_files_replace_their_own_and_keep_a_foreign_one(tmp_path: Path) -> None:
    first = write_quality(_quality(), tmp_path, plots=False)
    assert {p.name for p in first} == {"quality.json", "quality.md"}
    write_quality(_quality(), tmp_path, plots=False)  # its own files: replaced
    (tmp_path / "quality.json").unlink()
    (tmp_path / "quality.md").write_text("# a colleague's write-up\n")
    with pytest.raises(InputError, match="did not write"):
        write_quality(_quality(), tmp_path, plots=False)
    assert not (tmp_path / "quality.json").exists()
    assert (tmp_path / "quality.md").read_text() == "# a colleague's write-up\n"


def test_catalog_build_knows_a_catalog_from_another_json(tmp_path: Path) -> None:
    from tierctl.catalog.store import load_catalog

    assert _is_catalog(load_catalog("sglang", "0.5.23").to_json())
    assert not _is_catalog('{"kind": "quality"}')
    assert not _is_catalog("not json")
