"""The shipped SGLang 0.5.23 catalog against the installed SGLang's own, unstubbed parser.

``scripts/ensure-sglang`` installs the release itself (with torch), so its parser is built by
its own import, nothing stood in for (the dump lists no stubbed package and no degraded
module), and ``tierctl catalog build sglang==0.5.23 --parser-python PY --installed`` must
write exactly the shipped catalog.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tierctl.catalog.build import build_catalog
from tierctl.catalog.parity import compare, dump_parser
from tierctl.catalog.store import data_dir, load_catalog
from tierctl.catalog.wheel import default_cache_dir, download_wheel
from tierctl.realengine import sglang as realsglang

pytestmark = [pytest.mark.real_engine, pytest.mark.slow]


def test_the_installed_release_is_the_catalogs(sglang_python: Path) -> None:
    out = subprocess.run(
        [str(sglang_python), "-c", "import sglang; print(sglang.__version__)"],
        capture_output=True,
        text=True,
        timeout=300,
        env=realsglang.engine_env(),
        check=True,
    ).stdout.split()
    assert out[-1] == realsglang.SGLANG_VERSION == load_catalog("sglang", "0.5.23").version


def test_the_shipped_catalog_agrees_with_the_installed_unstubbed_parser(
    sglang_python: Path,
) -> None:
    dump = dump_parser(sglang_python, "sglang", None, env=realsglang.engine_env())
    assert dump["stubbed"] == []
    assert dump["degraded"] == []
    catalog = load_catalog("sglang", "0.5.23")
    parity = compare(catalog, dump)
    assert parity.compared == len(catalog.flags) == 531
    assert [str(m) for m in parity.mismatches] == []
    assert parity.not_compared == ()


def test_a_catalog_built_from_the_installed_parser_is_the_shipped_one(
    sglang_python: Path,
) -> None:
    wheel = download_wheel("sglang", "0.5.23", default_cache_dir())
    built = build_catalog(
        "sglang==0.5.23",
        wheel=wheel,
        parser_python=sglang_python,
        installed=True,
        parser_env=realsglang.engine_env(),
    )
    shipped = (data_dir() / "sglang-0.5.23.json").read_text(encoding="utf-8")
    assert json.loads(built.to_json()) == json.loads(shipped)
    assert built.to_json() == shipped
