"""``tierctl import``: grouping, what a spec gains for real files, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tierctl.adopt import adopt, without_render_additions
from tierctl.errors import InputError
from tierctl.render import render_compose
from tierctl.spec.effective import unwrap_command, wrap_command
from tierctl.spec.loader import load_spec_text
from tierctl.spec.tier_spec import ShellWrapper

DEV = "deploy: {{resources: {{reservations: {{devices: [{{driver: nvidia, device_ids: [{ids}], capabilities: [gpu]}}]}}}}}}"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "compose.yaml"
    path.write_text(text)
    return path


def _two_replicas(flags_b: str = "--port 30000 --enable-metrics") -> str:
    return (
        "services:\n"
        "  a:\n    image: lmsysorg/sglang:v0.5.9-cu126\n    container_name: a\n"
        "    command: python3 -m sglang.launch_server --model-path /m --port 30000\n"
        f"    {DEV.format(ids=chr(39) + '0' + chr(39))}\n    environment: {{A: '1', B: '2'}}\n"
        "  b:\n    image: lmsysorg/sglang:v0.5.9-cu126\n    container_name: b\n"
        f"    command: python3 -m sglang.launch_server --model-path /m {flags_b}\n"
        f"    {DEV.format(ids=chr(39) + '1' + chr(39))}\n    environment: {{A: '1'}}\n"
        "  proxy:\n    image: nginx:1.27\n"
    )


def test_replicas_grouped_shared_parts_become_the_engines(tmp_path: Path) -> None:
    result = adopt([_write(tmp_path, _two_replicas())], out=tmp_path / "tier.yaml")
    spec = result.spec
    assert result.differences == []
    assert list(spec.replicas) == ["a", "b"]
    assert spec.engine.args == {"model-path": "/m", "port": "30000"}
    assert spec.engine.env == {"A": "1"}
    assert spec.replicas["a"].env == {"B": "2"}
    assert spec.replicas["b"].args == {"enable-metrics": True}
    assert spec.replicas["b"].gpus == [1]
    assert spec.services["proxy"].role == "nginx"
    assert spec.engine.image_policy == "tag"
    # The written text loads as is and renders the same file.
    again = load_spec_text(result.text, str(tmp_path / "tier.yaml"))
    assert render_compose(again, spec_path=tmp_path / "tier.yaml") == result.rendered


def test_a_removed_flag_is_a_null_override(tmp_path: Path) -> None:
    result = adopt([_write(tmp_path, _two_replicas(""))], out=tmp_path / "t.yaml")
    assert result.spec.replicas["b"].args == {"port": None} or result.spec.engine.args == {
        "model-path": "/m"
    }
    assert result.differences == []


def test_equals_flags_and_repeats_round_trip(tmp_path: Path) -> None:
    text = (
        "services:\n  a:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
        "    command: [python3, -m, sglang.launch_server, --model-path=/m, --port=30000,"
        " --lora-paths, a=/l/a, --lora-paths, b=/l/b]\n"
        f"    {DEV.format(ids=chr(39) + '0' + chr(39))}\n"
    )
    result = adopt([_write(tmp_path, text)], out=tmp_path / "t.yaml")
    assert result.differences == []
    assert result.spec.engine.equals_flags == ["model-path", "port"]
    assert result.spec.engine.args["lora-paths"] == {"repeat": ["a=/l/a", "b=/l/b"]}
    assert result.spec.engine.container_name is False
    assert "--model-path=/m" in result.rendered


def test_dollar_escapes_and_references_survive(tmp_path: Path) -> None:
    text = (
        "services:\n  a:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
        "    command: python3 -m sglang.launch_server --model-path ${MODEL:-/m}\n"
        f"    {DEV.format(ids=chr(39) + '0' + chr(39))}\n"
        "  n:\n    image: nginx:1.27\n    command: [sh, -c, 'echo $$HOME $1']\n"
    )
    result = adopt([_write(tmp_path, text)], out=tmp_path / "t.yaml")
    assert result.differences == []
    assert "${MODEL:-/m}" in result.rendered
    assert "$$HOME $1" in result.rendered


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("services:\n  x:\n    image: nginx:1.27\n", "no engine service"),
        (
            "services:\n  _a1:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
            "    command: python3 -m sglang.launch_server --model-path /m\n"
            f"    {DEV.format(ids=chr(39) + '0' + chr(39))}\n",
            "cannot name a replica",
        ),
    ],
)
def test_what_a_spec_cannot_say_is_refused_and_located(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(InputError, match=message) as info:
        adopt([_write(tmp_path, text)], out=tmp_path / "t.yaml")
    assert info.value.location is not None
    assert info.value.fix


def test_cli_writes_the_spec_and_reports_the_round_trip(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, _two_replicas())
    out = tmp_path / "tier.yaml"
    result = run_cli("import", str(path), "--output", str(out))
    assert result.code == 0, result.err
    assert "equivalent" in result.err
    assert out.read_text().startswith("# Imported by `tierctl import`")
    again = run_cli("import", str(path), "--output", str(out))
    assert again.code == 2
    assert "refusing to overwrite" in again.err
    render = run_cli("render", str(out))
    assert render.code == 0


def test_engine_in_a_shell_script_becomes_a_wrapped_replica(tmp_path: Path) -> None:
    text = (
        "services:\n  c:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
        "    command: [sh, -c, 'pip install x && python3 -m sglang.launch_server --model-path /m"
        " --tp 1 2>&1 | tee /log']\n"
    )
    result = adopt([_write(tmp_path, text)], out=tmp_path / "t.yaml")
    assert result.differences == []
    shell = result.spec.engine.shell
    assert shell is not None
    assert shell.command == ["sh", "-c"]
    assert shell.script == "pip install x && {argv} 2>&1 | tee /log"
    assert result.spec.engine.args == {"model-path": "/m", "tp": "1"}


def test_a_multi_line_script_is_kept_as_a_service(tmp_path: Path) -> None:
    text = _two_replicas() + (
        "  c:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
        "    command: [sh, -c, 'python3 -m sglang.launch_server \\\n  --model-path /m']\n"
    )
    result = adopt([_write(tmp_path, text)], out=tmp_path / "t.yaml")
    assert "c" in result.spec.services
    assert any("shell script" in n for n in result.notes)
    assert result.differences == []


def test_literal_secret_becomes_a_reference_and_is_written_nowhere(tmp_path: Path) -> None:
    token = "hf_abcdefghijklmnopqrstuvwxyz0123"
    text = (
        "services:\n  a:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
        "    command: python3 -m sglang.launch_server --model-path /m\n"
        f"    environment: {{HF_TOKEN: {token}, PASS: '${{DB_PASS:-admin}}', KEEP: [x]}}\n"
        "  db:\n    image: postgres:16\n    environment: [POSTGRES_PASSWORD=hunter2hunter2]\n"
    )
    text = text.replace("KEEP: [x]", "PLAIN: x")
    result = adopt([_write(tmp_path, text)], out=tmp_path / "t.yaml")
    assert result.differences == []
    vars_ = {(r.service, r.var) for r in result.references}
    assert vars_ == {("a", "HF_TOKEN"), ("a", "DB_PASS"), ("db", "POSTGRES_PASSWORD")}
    for where in (result.text, result.rendered, "\n".join(result.notes)):
        for value in (token, "hunter2", "admin"):
            assert value not in where
    assert "${HF_TOKEN:?set HF_TOKEN}" in result.rendered
    assert any("set HF_TOKEN" in n for n in result.notes)


@pytest.mark.parametrize(
    ("keys", "style", "count"),
    [
        ("gpus: all", "gpus", "all"),
        ("runtime: nvidia\n    environment: {NVIDIA_VISIBLE_DEVICES: '0,1'}", "runtime", None),
        ("devices: [/dev/kfd, /dev/dri]", "amd", "all"),
        (
            "deploy: {resources: {reservations: {devices: [{capabilities: [gpu], count: all}]}}}",
            "as-written",
            "all",
        ),
        ("ipc: host", "deploy", 0),
    ],
)
def test_gpu_styles_are_kept(tmp_path: Path, keys: str, style: str, count: object) -> None:
    text = (
        "services:\n  a:\n    image: vllm/vllm-openai:v0.11.0\n"
        f"    command: [--model, /m]\n    {keys}\n"
    )
    result = adopt([_write(tmp_path, text)], out=tmp_path / "t.yaml")
    assert result.differences == []
    replica = result.spec.replicas["a"]
    assert replica.gpu_style == style
    assert replica.gpu_count == count
    if count != 2 and style != "runtime":
        assert any("GPU fit not checked" in n for n in result.notes)


def test_latest_and_container_names_are_kept(tmp_path: Path) -> None:
    text = (
        "services:\n  a:\n    image: lmsysorg/sglang:latest\n    container_name: sglang-main\n"
        "    command: python3 -m sglang.launch_server --model-path /m\n    gpus: all\n"
        "  ui:\n    image: ghcr.io/open-webui/open-webui:main\n"
    )
    result = adopt([_write(tmp_path, text)], out=tmp_path / "t.yaml")
    assert result.differences == []
    assert result.spec.engine.image == "lmsysorg/sglang:latest"
    assert result.spec.engine.image_policy == "as-written"
    assert result.spec.replicas["a"].container_name == "sglang-main"
    assert "container_name: sglang-main" in result.rendered
    assert any("newest shipped sglang release" in n for n in result.notes)


def test_engine_service_marks_a_custom_launcher(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    text = (
        "services:\n  llm:\n    image: example/llm:1.2\n    entrypoint: [/start.sh]\n"
        "    command: [--model-path, /m, --tp-size, '2']\n    gpus: all\n"
    )
    path = _write(tmp_path, text)
    refused = run_cli("import", str(path))
    assert refused.code == 2
    assert "--engine-service" in refused.err
    result = adopt(
        [path], out=tmp_path / "t.yaml", engine="sglang==0.5.23", engine_services=["llm"]
    )
    assert result.differences == []
    assert result.spec.engine.entrypoint == ["/start.sh"]
    assert result.spec.engine.args == {"model-path": "/m", "tp-size": "2"}
    ok = run_cli("import", str(path), "--engine-service", "llm", "--engine", "sglang==0.5.23")
    assert ok.code == 0, ok.err


def test_relative_paths_are_rebased_for_another_folder(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "proj").mkdir()
    path = tmp_path / "proj" / "compose.yaml"
    path.write_text(
        "services:\n  a:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
        "    command: python3 -m sglang.launch_server --model-path /m\n"
        "    volumes: [./models:/models, hf:/root/.cache]\n"
        "volumes: {hf: {}}\n"
    )
    out = tmp_path / "specs" / "tier.yaml"
    result = run_cli("import", str(path), "--output", str(out))
    assert result.code == 0, result.err
    assert "../proj/models:/models" in (tmp_path / "specs" / "tier.yaml").read_text()
    render = run_cli("render", str(out), "--write")
    assert render.code == 0, render.err


# The characters a shell treats specially, and a few plain ones (a fixed alphabet keeps the
# generation cheap on a loaded machine).
_SHELL_CHARS = "a1 $;&|<>'\"\\\n\t{}=*?#~()-é"


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.text(alphabet=_SHELL_CHARS, max_size=8), min_size=1, max_size=6))
def test_a_wrapped_argv_reads_back_token_for_token(argv: list[str]) -> None:
    """wrap_command then unwrap_command is the identity (the script's engine command is read
    with compose's shell-words rules), whatever the tokens hold: spaces, quotes, ; & |, $."""
    shell = ShellWrapper(command=["sh", "-c"], script="cd /x && {argv} 2>&1")
    command = wrap_command(shell, argv)
    assert unwrap_command(shell, tuple(command)) == tuple(argv)


def test_render_additions_are_the_only_thing_taken_out() -> None:
    """A label or logging block of the file's own is kept: only tierctl's additions go."""
    original = {"services": {"a": {"labels": {"team": "ml"}, "logging": {"driver": "local"}}}}
    rendered = {
        "x-tierctl": {"tier": "t"},
        "services": {
            "a": {
                "labels": {"team": "ml", "tierctl.tier": "t", "tierctl.role": "none"},
                "logging": {"driver": "local"},
            },
            "b": {"labels": {"tierctl.tier": "t"}, "logging": {"driver": "json-file"}},
        },
    }
    out = without_render_additions(rendered, original, ["a"])
    assert out["services"]["a"] == original["services"]["a"]
    assert "x-tierctl" not in out
    # b is not a replica: nothing of it is taken out.
    assert out["services"]["b"] == rendered["services"]["b"]
