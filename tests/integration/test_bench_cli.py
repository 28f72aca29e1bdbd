"""``tierctl bench run`` / ``bench ab`` end to end against the Node.js SSE server on loopback."""

from __future__ import annotations

import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import orjson
import pytest

from tierctl.cli.main import main
from tierctl.runtime.process import free_port

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
            "--output",
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
            "--output",
            str(out),
            "--no-plots",
        ]
    )
    doc = orjson.loads((out / "results.json").read_bytes())
    assert doc["pairs"] == 4
    assert [b["arm"] for b in doc["blocks"]] == list("ABBAABBA")
    completion = next(r for r in doc["ratios"] if r["metric"] == "completion_pct")
    assert completion["ratio"] == 1.0
    stdout = capsys.readouterr().out
    assert f"A = {node_url}, B = {node_url}: 4 paired blocks" in stdout
    assert "│ B/A " in stdout  # the ratio row, beside the arms' own rows


def _lines(stream: IO[str]) -> queue.Queue[str | None]:
    """The lines of ``stream`` as they come (None at its end), read by a daemon thread, so a
    test can wait for one with a bound instead of blocking on ``readline``."""
    got: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            got.put(line.strip())
        got.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return got


def _next_line(lines: queue.Queue[str | None], deadline: float, what: str) -> str:
    left = deadline - time.monotonic()
    try:
        line = lines.get(timeout=max(left, 0.0))
    except queue.Empty:
        pytest.fail(f"no {what} within the bound")
    assert line is not None, f"the server's output ended before {what}"
    return line


#: Bounds of the Ctrl-C test, generous for a loaded machine (a slow start or shutdown is not a
#: defect); the server's stall is longer than all of them, so only a run that really stops on
#: SIGINT (cancelling its in-flight requests) exits within them.
_START_BOUND_S = 180.0
_STOP_BOUND_S = 240.0
_STALL_MS = 1_200_000


def test_ctrl_c_saves_partial_results_with_the_accounting(tmp_path):
    """SIGINT to a real `tierctl bench run` whose server stalls: exit 130, results written.

    SIGINT goes once the server has seen the requests arrive (its log line per POST, not a
    fixed sleep); the server never answers within the bounds, so the run can only end by
    honouring Ctrl-C, with every request accounted as interrupted."""
    import os
    import signal
    import sys

    out = tmp_path / "partial"
    env = {**os.environ, "SSE_LOG": "1"}
    src = str(Path(__file__).parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    deadline = time.monotonic() + _START_BOUND_S
    with subprocess.Popen(
        ["node", str(SERVER_JS), "0", "8", str(_STALL_MS)], stdout=subprocess.PIPE, text=True,
        env=env,
    ) as server:  # fmt: skip
        try:
            assert server.stdout is not None
            lines = _lines(server.stdout)
            port = int(_next_line(lines, deadline, "port from the server"))
            cmd = [sys.executable, "-m", "tierctl", "bench", "run", "--url",
                   f"http://127.0.0.1:{port}", "--burst", "3x20", "--hammer-rate", "1",
                   "--hammer-count", "50", "--timeout", "3600", "--output", str(out), "--no-plots"]  # fmt: skip
            cli = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                for n in range(4):  # the burst of 3 and the first hammer request arrived
                    got = _next_line(lines, deadline, f"request {n + 1} at the server")
                    assert got == "request"
                cli.send_signal(signal.SIGINT)
                try:
                    stdout, err = cli.communicate(timeout=_STOP_BOUND_S)
                except subprocess.TimeoutExpired:
                    pytest.fail(f"bench run did not stop within {_STOP_BOUND_S:g} s of SIGINT")
                assert cli.returncode == 130, err.decode()[-2000:]
                assert "INTERRUPTED after" in stdout.decode()
                assert "these results are partial" in stdout.decode()
            finally:
                if cli.poll() is None:
                    cli.kill()  # ours, by its pid
                cli.communicate(timeout=60)
        finally:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=60)
    doc = orjson.loads((out / "results.json").read_bytes())["run"]
    assert doc["interrupted"] is True
    assert doc["sent"] >= 4
    assert doc["sent"] == doc["completed"] + doc["failed"] + doc["timed_out"]
    assert doc["sent"] < doc["planned"]
    assert {r["error_class"] for r in doc["requests"]} == {"interrupted"}


def test_a_dead_endpoint_is_an_error_not_a_run(tmp_path, capsys):
    port = free_port()  # a port nothing listens on
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(SystemExit) as exc:
        main(["bench", "run", "--url", url, "--hammer-rate", "5", "--output", str(tmp_path / "o")])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert f"cannot reach --url {url}: connection refused" in err
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()  # no empty report
    with pytest.raises(SystemExit) as exc:
        main(["bench", "ab", "--a", url, "--b", url, "--hammer-rate", "5"])
    assert exc.value.code == 1
    assert "cannot reach --a" in capsys.readouterr().err


@pytest.mark.parametrize("columns", [80, 120])
def test_the_run_table_fits_the_terminal_without_cutting_a_figure(
    node_url, tmp_path, capsys, monkeypatch, columns
):
    # Regression: at 120 columns the table printed "184…" for a figure.
    from tierctl.quantity import Unit, format_value

    monkeypatch.setenv("COLUMNS", str(columns))
    out = tmp_path / "out"
    main(["bench", "run", "--url", node_url, "--burst", "6x50", "--hammer-rate", "40",
          "--hammer-count", "10", "--no-probe", "--no-plots", "--output", str(out)])  # fmt: skip
    stdout = capsys.readouterr().out
    table = stdout.split("sent 16 = ")[0]
    assert "…" not in table
    assert max(len(line) for line in table.splitlines()) <= columns
    doc = orjson.loads((out / "results.json").read_bytes())
    s = doc["run"]["summary"]
    for field, unit in (("ttft_p50_s", Unit.SECONDS), ("output_tok_per_s", Unit.TOKENS_PER_SECOND)):
        assert f" {format_value(s[field], unit)} " in table, (field, table)


def test_workload_strings_print_as_written_not_as_markup(node_url, tmp_path, capsys):
    """Issue #22: a lane named `[/]` was a rich MarkupError, `[fp8]` vanished as a style."""
    workload = tmp_path / "w.yaml"
    workload.write_text(
        "name: '[fp8]'\nlanes:\n  - kind: burst\n    name: '[/]'\n    count: 2\n"
        "    input_tokens: 20\n    output_tokens: 4\n  - kind: burst\n    name: '[fp8]'\n"
        "    count: 2\n    input_tokens: 20\n    output_tokens: 4\n"
    )
    main(["bench", "run", "--url", node_url, "--workload", str(workload), "--no-probe"])
    stdout = capsys.readouterr().out
    assert "sent 4 = completed 4" in stdout
    lanes = {line.split("│")[1].strip() for line in stdout.splitlines() if line.count("│") > 3}
    assert {"[/]", "[fp8]"} <= lanes, stdout


def test_realtime_runs_the_client_fifo_and_restores_it(node_url, tmp_path, capsys):
    """``--realtime``: the run completes with the client's loop real-time (root here, as in
    CI); the process is back at its own class after the run."""
    import os

    before = os.sched_getscheduler(0)
    main(
        ["bench", "run", "--url", node_url, "--hammer-rate", "50", "--hammer-count", "20",
         "--realtime", "--no-plots", "--output", str(tmp_path / "out")]
    )  # fmt: skip
    stdout = capsys.readouterr().out
    assert "sent 20 = completed 20 + failed 0 + timed out 0" in stdout
    if os.geteuid() == 0:
        assert "--realtime:" not in stdout  # it took effect: no note
        assert "real-time (SCHED_FIFO)" in stdout  # the client check says so
        doc = orjson.loads((tmp_path / "out" / "results.json").read_bytes())
        assert doc["run"]["client_check"]["realtime"] is True
    else:
        assert "CAP_SYS_NICE" in stdout
    assert os.sched_getscheduler(0) == before
