"""The HTTP fuzzer (``tests/http_fuzz.py``) over every route of ``agent serve``, ``judge
serve`` and ``sim serve`` (both engine surfaces), each run as an operator runs it: a bounded
batch per surface, a fixed seed (``python -m tests.http_fuzz`` runs more).

Properties: no 500 (nor an undocumented 5xx), no traceback in the server's output, no secret
in any answer in any encoding, slow clients answered or closed, the server answering its
health route throughout, no file written outside the server's allowed folders.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.http_fuzz import run_surface, written_outside
from tests.integration.servers import ALL_KINDS, serve

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Cases per surface and the most seconds a surface's batch may take (it stops early then,
#: and says how many it ran): bounded in count and in time, so `make test` stays minutes.
COUNT = 120
MAX_SECONDS = 45.0
SEED = 20261207


@pytest.mark.parametrize("surface", ALL_KINDS)
def test_no_route_breaks_a_property_under_hostile_requests(surface: str, tmp_path: Path) -> None:
    with serve(surface, tmp_path / surface, stub_compose=True) as served:
        since = time.time()
        run = run_surface(served, SEED, COUNT, MAX_SECONDS)
    outside = written_outside(tmp_path, served.writable, since)
    summary = f"{run.cases} cases ({run.slow} slow), statuses {run.statuses}"
    assert run.cases >= 20, summary  # a batch cut short by a loaded machine still means something
    assert not run.findings, "\n".join(f.line() for f in run.findings) + "\n" + summary
    assert not outside, outside
    # Each kind of route was reached, and refused and served both.
    assert any(s.startswith("4") for s in run.statuses), summary
    assert "200" in run.statuses, summary
