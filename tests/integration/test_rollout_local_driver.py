"""The executor with the local driver over real processes on loopback.

The engines here are a minimal stand-in (an HTTP server that reports its argv the way SGLang's
/server_info does), so this runs without the simulator; tests/e2e/test_rollout_sim.py runs the
same stories over `tierctl sim serve`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tierctl.errors import GateFailed, InputError
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.executor import RolloutOptions, load_sides, run_rollout
from tierctl.rollout.gates import GateSettings
from tierctl.rollout.planner import plan_files
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import free_port

pytestmark = pytest.mark.integration

FAKE_ENGINE = r"""
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = sys.argv[1:]
info, i = {}, 0
while i < len(args):
    name = args[i][2:].replace("-", "_"); i += 1
    vals = []
    while i < len(args) and not args[i].startswith("--"):
        vals.append(args[i]); i += 1
    v = True if not vals else vals[0]
    if isinstance(v, str):
        for cast in (int, float):
            try:
                v = cast(v); break
            except ValueError:
                pass
    info[name] = v
info.update(json.loads(os.environ.get("FAKE_ENGINE_REPORTS", "{}")))
import time
time.sleep(float(os.environ.get("FAKE_ENGINE_DELAY_S", "0")))

class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        if self.path == "/health":
            body, ctype = b"", "text/plain"
        elif self.path == "/server_info" and os.environ.get("FAKE_ENGINE_HTML"):
            # Something else answers on the port: a gateway's error page, 200 and HTML.
            body, ctype = b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"
        elif self.path == "/server_info":
            body, ctype = json.dumps(info).encode(), "application/json"
        elif self.path == "/metrics":
            body = b'sglang:num_running_reqs{model_name="m"} 0\nsglang:e2e_request_latency_seconds_count{model_name="m"} 0\n'
            ctype = "text/plain"
        else:
            self.send_response(404); self.end_headers(); return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

srv = ThreadingHTTPServer(("127.0.0.1", int(info["port"])), H)
print(f"listening on http://127.0.0.1:{srv.server_address[1]}", flush=True)
srv.serve_forever()
"""


def compose(
    ports: dict[str, int],
    pdi: dict[str, int],
    *,
    reports: dict[str, str] | None = None,
    scrape_variant_r2: str | None = None,
    delay_s: dict[str, float] | None = None,
    html: frozenset[str] = frozenset(),
) -> str:
    """A small tier: r1 control, r2 canary, a proxy and a collector scraping both."""
    services: dict[str, object] = {}
    scrape = []
    for name, role in (("r1", "control"), ("r2", "canary")):
        variant = f"small-pdi{pdi[name]}"
        services[f"model-{name}"] = {
            "image": "sglang@sha256:1",
            "container_name": f"model-{name}",
            "command": [
                "python3",
                "-m",
                "sglang.launch_server",
                "--model-path",
                "/m",
                "--host",
                "127.0.0.1",
                "--port",
                str(ports[name]),
                "--prefill-decode-interval",
                str(pdi[name]),
                "--enable-metrics",
            ],
            "environment": {
                "FAKE_ENGINE_REPORTS": (reports or {}).get(name, "{}"),
                "FAKE_ENGINE_DELAY_S": str((delay_s or {}).get(name, 0)),
                **({"FAKE_ENGINE_HTML": "1"} if name in html else {}),
            },
            "labels": {"config_variant": variant, "tierctl.role": role},
        }
        shown = scrape_variant_r2 if name == "r2" and scrape_variant_r2 else variant
        scrape.append({"container_name": f"model-{name}", "config_variant": shown})
    services["proxy"] = {"image": "proxy", "command": ["--backends", *map(str, ports.values())]}
    services["otelcol"] = {"image": "otel/opentelemetry-collector-contrib", "configs": ["scrape"]}
    doc = {
        "services": services,
        "configs": {
            "scrape": {
                "content": yaml.safe_dump({"static_configs": [{"labels": s} for s in scrape]})
            }
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


class Tier:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports = {"r1": free_port(), "r2": free_port()}
        script = tmp / "fake_engine.py"
        script.write_text(FAKE_ENGINE)
        self.driver = LocalDriver(
            tmp / "state", launcher=[sys.executable, str(script)], start_timeout_s=30
        )
        self.journal = tmp / "journal.jsonl"

    def files(self, old: str, new: str) -> tuple[Path, Path]:
        a, b = self.tmp / "old.yaml", self.tmp / "new.yaml"
        a.write_text(old)
        b.write_text(new)
        return a, b

    def start_old(self, old_path: Path, new_path: Path) -> object:
        plan = plan_files(str(old_path), str(new_path))
        old, new = load_sides(plan)
        for svc in ("model-r1", "model-r2"):
            self.driver.apply(old, [svc])
        return plan, old, new

    def reported(self, svc: str, key: str) -> object:
        import httpx

        url = self.driver.state()[svc]["url"]
        return httpx.get(f"{url}/server_info", timeout=3).json()[key]


@pytest.fixture
def tier(tmp_path: Path) -> Iterator[Tier]:
    t = Tier(tmp_path)
    yield t
    t.driver.down_all()


def test_canary_rollout_recreates_only_r2_and_passes_its_gates(tier: Tier) -> None:
    old_p, new_p = tier.files(
        compose(tier.ports, {"r1": 1, "r2": 1}), compose(tier.ports, {"r1": 1, "r2": 2})
    )
    plan, old, new = tier.start_old(old_p, new_p)
    r1_pid = tier.driver.state()["model-r1"]["pid"]
    result = run_rollout(
        plan,
        tier.driver,
        old,
        new,
        RolloutOptions(tier.journal, gates=GateSettings(poll_interval_s=0.05)),
    )  # type: ignore[arg-type]
    assert [(o.step, o.status) for o in result.outcomes] == [
        ("01-recreate-model-r2", "done"),
        ("02-recreate-otelcol", "done"),
    ]
    assert tier.reported("model-r2", "prefill_decode_interval") == 2
    assert tier.driver.state()["model-r1"]["pid"] == r1_pid
    notes = result.outcomes[0].notes
    assert "health: 200" in notes
    assert any("flags match" in n for n in notes)


def test_an_engine_reporting_other_args_is_rolled_back(tier: Tier) -> None:
    old_p, new_p = tier.files(
        compose(tier.ports, {"r1": 1, "r2": 1}),
        compose(
            tier.ports,
            {"r1": 1, "r2": 2},
            reports={"r2": json.dumps({"prefill_decode_interval": 0})},
        ),
    )
    plan, old, new = tier.start_old(old_p, new_p)
    r1_pid = tier.driver.state()["model-r1"]["pid"]
    with pytest.raises(GateFailed, match="prefill-decode-interval: rendered 2, engine reports 0"):
        run_rollout(
            plan,
            tier.driver,
            old,
            new,
            RolloutOptions(tier.journal, gates=GateSettings(poll_interval_s=0.05)),
        )  # type: ignore[arg-type]
    assert tier.reported("model-r2", "prefill_decode_interval") == 1
    assert tier.driver.state()["model-r1"]["pid"] == r1_pid
    events = [json.loads(line)["event"] for line in tier.journal.read_text().splitlines()]
    assert events == ["start", "begin", "applied", "gate-failed", "rolled-back"]


def test_an_engine_answering_html_for_server_info_is_rolled_back_and_not_resumed(
    tier: Tier,
) -> None:
    old_p, new_p = tier.files(
        compose(tier.ports, {"r1": 1, "r2": 1}),
        compose(tier.ports, {"r1": 1, "r2": 2}, html=frozenset({"r2"})),
    )
    plan, old, new = tier.start_old(old_p, new_p)
    r1_pid = tier.driver.state()["model-r1"]["pid"]
    options = RolloutOptions(tier.journal, gates=GateSettings(poll_interval_s=0.05))
    with pytest.raises(GateFailed) as info:
        run_rollout(plan, tier.driver, old, new, options)  # type: ignore[arg-type]
    err = info.value
    assert err.message.startswith("01-recreate-model-r2 failed: model-r2: /server_info did not")
    assert "answer JSON (it began '<html><body><h1>502 Bad Gateway" in err.message
    assert "model-r2 was rolled back to OLD" in err.message
    assert err.rule == "a recreated engine reports its server args"
    assert "/server_info" in (err.fix or "")
    # The canary is back on OLD (it answers JSON again, with OLD's flag); r1 was never touched.
    assert tier.reported("model-r2", "prefill_decode_interval") == 1
    assert tier.driver.state()["model-r1"]["pid"] == r1_pid
    records = [json.loads(line) for line in tier.journal.read_text().splitlines()]
    assert [r["event"] for r in records] == ["start", "begin", "applied", "gate-failed",
                                             "rolled-back"]  # fmt: skip
    assert "did not answer JSON" in records[3]["error"]
    # A canary that failed its gate is never resumed into the rest of the plan.
    with pytest.raises(InputError, match="rolled back after a failed gate"):
        run_rollout(
            plan, tier.driver, old, new,
            RolloutOptions(tier.journal, resume=True, gates=GateSettings(poll_interval_s=0.05)),
        )  # type: ignore[arg-type]  # fmt: skip
    assert tier.reported("model-r2", "prefill_decode_interval") == 1


def test_a_variant_the_collector_would_report_differently_is_rolled_back(tier: Tier) -> None:
    old_p, new_p = tier.files(
        compose(tier.ports, {"r1": 1, "r2": 1}),
        compose(tier.ports, {"r1": 1, "r2": 2}, scrape_variant_r2="small-pdi1"),
    )
    plan, old, new = tier.start_old(old_p, new_p)
    with pytest.raises(GateFailed, match="would be reported as 'small-pdi1'"):
        run_rollout(
            plan,
            tier.driver,
            old,
            new,
            RolloutOptions(tier.journal, gates=GateSettings(poll_interval_s=0.05)),
        )  # type: ignore[arg-type]
    assert tier.reported("model-r2", "prefill_decode_interval") == 1


CRASHING_RUN = """
import sys
from pathlib import Path
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.executor import RolloutOptions, load_sides, run_rollout
from tierctl.rollout.gates import GateSettings
from tierctl.rollout.planner import plan_files

tmp = Path(sys.argv[1])
plan = plan_files(str(tmp / "old.yaml"), str(tmp / "new.yaml"))
old, new = load_sides(plan)
driver = LocalDriver(tmp / "state", launcher=[sys.executable, str(tmp / "fake_engine.py")])
run_rollout(plan, driver, old, new, RolloutOptions(tmp / "journal.jsonl", gates=GateSettings(poll_interval_s=0.05)))
"""


def test_a_killed_rollout_resumes_without_repeating_a_finished_step(tier: Tier) -> None:
    import os
    import signal
    import subprocess

    old_p, new_p = tier.files(
        compose(tier.ports, {"r1": 1, "r2": 1}),
        # Both replicas change; r1 (the second step) takes a while to start, so the kill lands
        # while it is in flight.
        compose(tier.ports, {"r1": 2, "r2": 2}, delay_s={"r1": 3.0}),
    )
    plan, old, new = tier.start_old(old_p, new_p)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_RUN, str(tier.tmp)], env=env)

    def second_step_begun() -> bool:
        lines = tier.journal.read_text().splitlines() if tier.journal.exists() else []
        return any('"begin"' in x and "model-r1" in x for x in lines)

    try:
        if not wait_until(second_step_begun, 60, poll_s=0.05):
            pytest.fail("the rollout never reached its second step")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(10)
    r2_pid = tier.driver.state()["model-r2"]["pid"]
    result = run_rollout(
        plan,
        tier.driver,
        old,
        new,
        RolloutOptions(tier.journal, resume=True, gates=GateSettings(poll_interval_s=0.05)),
    )  # type: ignore[arg-type]
    assert [o.status for o in result.outcomes] == ["skipped", "done", "done"]
    # r2's engine from the first run is the one still serving: its step was not repeated.
    assert tier.driver.state()["model-r2"]["pid"] == r2_pid
    assert tier.reported("model-r1", "prefill_decode_interval") == 2
    begins = [
        json.loads(x).get("step") for x in tier.journal.read_text().splitlines() if '"begin"' in x
    ]
    assert begins.count("01-recreate-model-r2") == 1
    assert begins.count("02-recreate-model-r1") == 2
    # The engine the killed run was starting was stopped by the resume, not orphaned.
    running = {int(e["pid"]) for e in tier.driver.state().values()}
    # A stopped engine can take a moment to exit after its signal; wait for it, bounded.
    wait_until(lambda: _live_pids(str(tier.tmp / "fake_engine.py")) == running, 10)
    assert _live_pids(str(tier.tmp / "fake_engine.py")) == running


def _live_pids(marker: str) -> set[int]:
    """Pids of live (not zombie) processes whose command line contains ``marker``."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            zombie = "State:\tZ" in (proc / "status").read_text()
        except OSError:
            continue
        if marker in cmdline and not zombie:
            found.add(int(proc.name))
    return found


class _Prometheus:
    """A stub of Prometheus's /api/v1/query on loopback that answers one variant per container."""

    def __init__(self, variants: dict[str, str]) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import parse_qs, urlparse

        self.queries: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query)["query"][0]
                stub.queries.append(query)
                result = [
                    {"metric": {"container_name": c, "config_variant": v}, "value": [0, "1"]}
                    for c, v in variants.items()
                    if f'container_name="{c}"' in query
                ]
                body = json.dumps(
                    {"status": "success", "data": {"resultType": "vector", "result": result}}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.mark.parametrize(("reported", "passes"), [("small-pdi2", True), ("small-pdi1", False)])
def test_prometheus_must_show_the_new_variant_after_the_collector_step(
    tier: Tier, reported: str, passes: bool
) -> None:
    old_p, new_p = tier.files(
        compose(tier.ports, {"r1": 1, "r2": 1}), compose(tier.ports, {"r1": 1, "r2": 2})
    )
    plan, old, new = tier.start_old(old_p, new_p)
    prom = _Prometheus({"model-r2": reported})
    gates = GateSettings(
        poll_interval_s=0.01, prometheus_url=prom.url, host_label="gpu02", metrics_timeout_s=0.05
    )
    try:
        if passes:
            result = run_rollout(
                plan, tier.driver, old, new, RolloutOptions(tier.journal, gates=gates)
            )  # type: ignore[arg-type]
            assert result.outcomes[1].notes == (
                "prometheus: model-r2 reports small-pdi2 (sglang:num_running_reqs)",
            )
            # From the collector step only (the engine step must not ask Prometheus while the
            # collector still attaches the old labels): the container's series names (their
            # prefix), then its variants under that prefix.
            assert len(prom.queries) == 2
            assert prom.queries[0].startswith("count by (__name__) ")
        else:
            with pytest.raises(GateFailed, match=r"Prometheus shows model-r2 as \['small-pdi1'\]"):
                run_rollout(plan, tier.driver, old, new, RolloutOptions(tier.journal, gates=gates))  # type: ignore[arg-type]
            events = [json.loads(x) for x in tier.journal.read_text().splitlines()]
            # r2's step finished; only the collector step failed and was rolled back.
            assert [(e["event"], e.get("step")) for e in events][-2:] == [
                ("gate-failed", "02-recreate-otelcol"),
                ("rolled-back", "02-recreate-otelcol"),
            ]
    finally:
        prom.close()
    assert prom.queries
    assert all('host_machine="gpu02"' in q for q in prom.queries)
    # No series names to detect a prefix from (this stub answers no __name__): SGLang's own.
    assert prom.queries[1] == (
        "count by (container_name, config_variant) "
        '(sglang:num_running_reqs{container_name="model-r2",host_machine="gpu02"})'
    )


def test_tierctl_stop_ends_what_a_rollout_left_running(tier: Tier, capsys) -> None:
    import json
    import os

    from tierctl.cli.main import main

    old_p, new_p = tier.files(
        compose(tier.ports, {"r1": 1, "r2": 1}), compose(tier.ports, {"r1": 1, "r2": 2})
    )
    tier.start_old(old_p, new_p)
    pids = {svc: e["pid"] for svc, e in tier.driver.state().items()}
    assert set(pids) == {"model-r1", "model-r2"}
    # A stale entry whose pid now belongs to another program (this test) is never signalled.
    state_file = tier.tmp / "state" / "state.json"
    state = json.loads(state_file.read_text())
    state["model-stale"] = {"pid": os.getpid(), "url": None, "log": "x", "argv": ["not", "me"]}
    state_file.write_text(json.dumps(state))
    main(["stop", "--state-dir", str(tier.tmp / "state")])
    out = capsys.readouterr().out.splitlines()
    assert sorted(out) == sorted(
        [
            f"model-r1 (pid {pids['model-r1']}): stopped",
            f"model-r2 (pid {pids['model-r2']}): stopped",
            f"model-stale (pid {os.getpid()}): not running",
        ]
    )
    for pid in pids.values():
        assert (
            not Path(f"/proc/{pid}").exists()
            or "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
        )
    assert json.loads(state_file.read_text()) == {}
    main(["stop", "--state-dir", str(tier.tmp / "state")])
    assert capsys.readouterr().out.strip().endswith("nothing running")


def test_local_engines_listen_on_loopback_whatever_the_file_says(tmp_path: Path) -> None:
    """A file rendered for containers says --host 0.0.0.0; the local driver's simulated
    engine listens on 127.0.0.1 only, and still reports the argv's --host."""
    import httpx

    port = free_port()
    text = yaml.safe_dump(
        {
            "services": {
                "model-r1": {
                    "image": "sglang",
                    "command": [
                        "python3",
                        "-m",
                        "sglang.launch_server",
                        "--model-path",
                        "/m",
                        "--host",
                        "0.0.0.0",
                        "--port",
                        str(port),
                    ],
                }
            }
        }
    )
    f = tmp_path / "c.yaml"
    f.write_text(text)
    _, side = load_sides(plan_files(str(f), str(f)))
    driver = LocalDriver(tmp_path / "state", time_scale=50, start_timeout_s=120)
    try:
        driver.apply(side, ["model-r1"])
        url = driver.endpoint(side, "model-r1")
        assert url == f"http://127.0.0.1:{port}"
        log = Path(driver.state()["model-r1"]["log"]).read_text()
        assert f"listening on http://127.0.0.1:{port}" in log
        assert httpx.get(f"{url}/server_info", timeout=10).json()["host"] == "0.0.0.0"
        listening = _listening_addresses(port)
        assert listening == {"127.0.0.1"}, listening
    finally:
        driver.down_all()


def _listening_addresses(port: int) -> set[str]:
    """IPv4 addresses with a LISTEN socket on ``port``, from /proc/net/tcp."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, p = local.split(":")
        if int(p, 16) == port and state == "0A":
            octets = [str(int(addr[i : i + 2], 16)) for i in (6, 4, 2, 0)]
            found.add(".".join(octets))
    return found
