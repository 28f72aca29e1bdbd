"""Reproducers of the sweep generator's seed 4411931 (issue #22, session 8), rebuilt by
``benchmarks/fuzz.py --generator all --seed 4411931 --only N``.

Inputs 6785 (a spec) and 6830 (the same spec, as a kube input) give one replica an unknown
flag repeated 200,000 times (``x: {repeat: [1, 1, ...]}``, a 600 KB file). ``render`` and
``show`` took 15-22 s of CPU and ``render --target kubernetes`` 72 s: every use of the flag
scanned the catalog again (the abbreviation scan of ``Catalog.resolve``, and, in the
Kubernetes check, the did-you-mean scan per finding), and the warning named the replica once
per use (a 1.4 MB line). The tests count the scans, not the seconds: a repeated unknown flag
costs one of each however many times it is repeated, and is reported naming its replica once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import CliResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

RunCli = Callable[..., CliResult]
REPEATS = 400


#: The reproducer, minimized (200,000 repeats -> 400; the costs counted below are per use).
REPRODUCER = FIXTURES / "fuzz" / "4411931-6785-repeated-unknown-flag.yaml"


def _spec_with_repeated_flag(tmp_path: Path) -> Path:
    doc = yaml.safe_load(REPRODUCER.read_text())
    assert doc["replicas"]["r1"]["args"] == {"x": {"repeat": [1] * REPEATS}}
    # Beside the example's other files (its telemetry and services refer to none of them).
    path = tmp_path / "tier.yaml"
    path.write_bytes(REPRODUCER.read_bytes())
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "{p}"],
        ["show", "{p}"],
        ["render", "{p}", "--target", "kubernetes"],
        ["show", "--format", "json", "{p}"],
    ],
)
def test_a_flag_repeated_many_times_is_looked_up_once(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    import tierctl.contracts.flag_catalog as flag_catalog
    from tierctl.engine_catalog import Catalog

    spec = _spec_with_repeated_flag(tmp_path)
    calls = {"resolve": 0, "did_you_mean": 0}
    resolve_new, did_you_mean = getattr(Catalog, "_resolve_new", None), flag_catalog.did_you_mean

    def counted_resolve(self: Catalog, token: str, underscores: bool) -> object:
        calls["resolve"] += token == "--x"
        assert resolve_new is not None
        return resolve_new(self, token, underscores)

    def counted_did_you_mean(catalog: Catalog, token: str) -> str:
        calls["did_you_mean"] += token == "--x"
        return did_you_mean(catalog, token)

    monkeypatch.setattr(Catalog, "_resolve_new", counted_resolve, raising=False)
    monkeypatch.setattr(flag_catalog, "did_you_mean", counted_did_you_mean)
    result = run_cli(*[a.replace("{p}", str(spec)) for a in argv])
    assert "Traceback" not in result.err
    assert "--x is not a flag" in result.out + result.err, result
    # A handful per command (each catalog instance and check once), never one per use.
    assert calls["resolve"] <= 8, calls
    assert calls["did_you_mean"] <= 8, calls
    assert not re.search(r"qwen-r1, qwen-r1", result.out + result.err)


FLEET_NUL = FIXTURES / "fuzz" / "90210817-6794-fleet-nul-repo.yaml"


@pytest.mark.parametrize("field", ["repo", "file", "token_file"])
@pytest.mark.parametrize("with_spec", [False, True])
def test_a_nul_in_a_fleet_path_is_refused_with_its_line(
    tmp_path: Path, run_cli: RunCli, field: str, with_spec: bool
) -> None:
    """Seed 90210817 input 6794: ``repo: "\\0"`` was ``ValueError: embedded null byte``."""
    doc = yaml.safe_load(FLEET_NUL.read_text())
    if field != "repo":
        doc["repo"] = str(tmp_path)
        doc["hosts"][0][field] = "gpu01/\0compose.yaml"
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    spec = Path(__file__).resolve().parents[2] / "examples" / "small-model" / "tier.yaml"
    argv = ["fleet", "plan", str(path), *(["--spec", str(spec)] if with_spec else [])]
    result = run_cli(*argv)
    assert result.code == 2, result
    assert "Traceback" not in result.err
    assert "NUL" in result.err
    assert "fleet.yaml:" in result.err


def test_stray_values_after_a_flag_are_attached_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed 90210817 input 2803: ``watchdog-timeout: [1, 1, ...]`` (200,000 values of a
    one-value flag) rebuilt the flag's tuple per stray value: ``render --target kubernetes``
    ran past 165 s. The flag keeps every value (reported there), built once."""
    import tierctl.compose.argv as argv_mod
    from tierctl.catalog.store import load_catalog

    catalog = load_catalog("sglang", "0.5.23")  # --watchdog-timeout: one float value
    made = {"n": 0}
    real = argv_mod.FlagUse

    def counted(*args: object, **kwargs: object) -> object:
        made["n"] += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(argv_mod, "FlagUse", counted)
    argv = ("--watchdog-timeout", *["1"] * 2000, "--port", "1", "2")
    uses = argv_mod.parse_flags(argv, 0, catalog)
    assert [(u.token, len(u.values)) for u in uses] == [
        ("--watchdog-timeout", 2000),
        ("--port", 2),
    ]
    assert made["n"] <= 4, made
