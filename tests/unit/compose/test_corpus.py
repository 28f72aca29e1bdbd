"""Real-world-shaped compose files: each imports, round-trips and validates without a spec.

The round trip is the import's promise: import -> render -> semantic diff (tierctl's own
labels and project name aside) is empty, and the rendering validates against the imported
spec. Validation without a spec must hold on every file (no violations); what it could not
check is named, never silently skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.adopt import adopt
from tierctl.catalog.store import shipped
from tierctl.compose import Interpolation, load_compose, merge_compose, parse_compose
from tierctl.contracts.standalone import validate_files
from tierctl.contracts.validation import validate
from tierctl.errors import InputError
from tierctl.spec.semantic_diff import semantic_diff

CORPUS = Path(__file__).parent / "corpus"


def _cases() -> list[tuple[str, list[Path]]]:
    cases: list[tuple[str, list[Path]]] = []
    for path in sorted(CORPUS.iterdir()):
        if path.is_dir():
            cases.append((path.name, [path / "compose.yaml"]))
        elif path.suffix == ".yaml" and not path.name.endswith(".override.yaml"):
            override = path.with_name(path.stem + ".override.yaml")
            cases.append((path.stem, [path, override] if override.exists() else [path]))
    return cases


CASES = _cases()


def test_the_corpus_has_at_least_fifteen_files() -> None:
    assert len(CASES) >= 15


@pytest.mark.parametrize(("name", "paths"), CASES, ids=[c[0] for c in CASES])
def test_import_round_trips(name: str, paths: list[Path], tmp_path: Path) -> None:
    # The spec beside the file: its relative paths stay as written (the adopt corpus checks
    # the rebasing onto another folder with the real Compose).
    result = adopt(paths, out=paths[0].parent / "tier.yaml")
    assert result.differences == [], name
    # The rendering, read back, is equivalent to the original (checked independently of
    # adopt's own check) and validates against the imported spec.
    original = merge_compose(
        [load_compose(p, interpolation=Interpolation.AS_WRITTEN) for p in paths]
    )
    rendered = parse_compose(
        result.rendered, source="r.yaml", interpolation=Interpolation.AS_WRITTEN
    )
    assert semantic_diff(original, rendered) == []
    engine = result.spec.engine
    if (engine.kind, engine.version) in shipped():
        report = validate(result.spec, [parse_compose(result.rendered, source="r.yaml")])
        assert report.ok, report.text()
    else:
        # No shipped catalog: validation with this spec needs --catalog (exit 2, named).
        with pytest.raises(InputError, match="no flag catalog"):
            validate(result.spec, [parse_compose(result.rendered, source="r.yaml")])
    # The spec names every replica's service, and keeps the other services as services.
    assert set(result.spec.replicas) | set(result.spec.services) == set(original.services)


@pytest.mark.parametrize(("name", "paths"), CASES, ids=[c[0] for c in CASES])
def test_validates_without_a_spec(name: str, paths: list[Path]) -> None:
    report = validate_files(paths)
    assert report.ok, report.text()
    assert any("need a tier spec" in u for u in report.unchecked)
    assert report.replicas_checked >= 1
