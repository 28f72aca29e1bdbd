"""What ``tierctl validate`` of one compose file imports (issue #39's start-up; the figures are
benchmarks/startup.py's, never a timing threshold here): no pydantic (nor the
``importlib.metadata`` its plugin loader pulls in), no spec model, no spec contracts, no
Compose binary module when it is off, no Kubernetes library, no rich.

Mutation check: the first five were imported on this path before the start-up work (main at
0dbe1f2); putting one back (a top-level ``import pydantic`` in ``engine_catalog``, say) fails
this test. (``--target auto`` asks the Kubernetes adapter whether it claims the file: the
adapter loads, its library does not.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tierctl
from tests.conftest import EXAMPLES

NOT_LOADED = (
    "pydantic",
    "importlib.metadata",
    "tierctl.spec.tier_spec",
    "tierctl.contracts.validation",
    "tierctl.compose.binary",
    "tierctl.kubernetes",
    "tierctl.contracts.kubernetes",
    "tierctl.adopt",
    "tierctl.rollout.kubernetes",
    "rich",
)

PROBE = """
import json, sys
from tierctl.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    work = tmp_path_factory.mktemp("startup")
    shutil.copy(EXAMPLES / "small-model" / "compose.yaml", work / "compose.yaml")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "validate", "--no-compose-binary", "compose.yaml"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(Path(tierctl.__file__).parents[1]), "PATH": "/usr/bin:/bin"},
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, done.stderr
    return set(result["modules"])


def test_validate_checks_the_flags_with_a_catalog(loaded: set[str]) -> None:
    # The path under test did its work: the catalog and the standalone checks ran.
    assert {"tierctl.engine_catalog", "tierctl.catalog.store", "tierctl.contracts.standalone"} <= (
        loaded
    )


@pytest.mark.parametrize("module", NOT_LOADED)
def test_validate_of_a_compose_file_does_not_import(loaded: set[str], module: str) -> None:
    assert not any(m == module or m.startswith(module + ".") for m in loaded), module
