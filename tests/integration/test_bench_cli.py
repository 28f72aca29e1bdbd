"""``tierctl bench run`` / ``bench ab`` end to end against the Node.js SSE server on loopback."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tierctl.cli.main import main

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
]

SERVER_JS = Path(__file__).parents[2] / "benchmarks" / "assets" / "sse_server.js"


@pytest.fixture
def node_url() -> Iterator[str]:
    with subprocess.Popen(
        ["node", str(SERVER_JS), "0", "8"], stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_run_writes_every_output(node_url, tmp_path, capsys):
    out = tmp_path / "out"
    main(
        [
            "bench",
            "run",
            "--url",
            node_url,
            "--burst",
            "4x50",
            "--hammer-rate",
            "50",
            "--hammer-count",
            "20",
            "--probe",
            "/health@200ms",
            "--out",
            str(out),
        ]
    )
    stdout = capsys.readouterr().out
    assert "sent 24 = completed 24 + failed 0 + timed out 0" in stdout
    doc = orjson.loads((out / "results.json").read_bytes())
    assert doc["run"]["sent"] == 24
    assert {r["lane"] for r in doc["run"]["requests"]} == {"burst", "hammer"}
    assert all(r["output_tokens"] == 8 for r in doc["run"]["requests"])
    assert doc["run"]["probes"]
    for name in ("report.md", "latency_cdf.png", "probe_latency.png"):
        assert (out / name).stat().st_size > 0


def test_ab_same_server_gives_ratios_near_one(node_url, tmp_path, capsys):
    out = tmp_path / "ab"
    main(
        [
            "bench",
            "ab",
            "--a",
            node_url,
            "--b",
            node_url,
            "--burst",
            "20x50",
            "--order",
            "ABBA",
            "--repeat",
            "2",
            "--no-probe",
            "--out",
            str(out),
            "--no-plots",
        ]
    )
    doc = orjson.loads((out / "results.json").read_bytes())
    assert doc["pairs"] == 4
    assert [b["arm"] for b in doc["blocks"]] == list("ABBAABBA")
    completion = next(r for r in doc["ratios"] if r["metric"] == "completion_pct")
    assert completion["ratio"] == 1.0
    assert "B/A (4 paired blocks" in capsys.readouterr().out
