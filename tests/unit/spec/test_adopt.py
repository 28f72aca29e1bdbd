"""``tierctl import``: grouping, what a spec gains for real files, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.adopt import adopt
from tierctl.errors import InputError
from tierctl.render import render_compose
from tierctl.spec.loader import load_spec_text

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
        (
            "services:\n  a:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
            "    command: python3 -m sglang.launch_server --model-path /m\n",
            "reserves its GPUs otherwise",
        ),
        (
            "services:\n  a:\n    image: lmsysorg/sglang:latest\n"
            "    command: python3 -m sglang.launch_server --model-path /m\n",
            "names no engine release",
        ),
        ("services:\n  x:\n    image: nginx:1.27\n", "no engine service"),
        (
            "services:\n  a:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
            "    command: python3 -m sglang.launch_server --model-path /m\n"
            f"    {DEV.format(ids=chr(39) + '0' + chr(39))}\n    environment: [HF_TOKEN]\n",
            "passed through from the host",
        ),
        (
            "services:\n  A_1:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
            "    command: python3 -m sglang.launch_server --model-path /m\n"
            f"    {DEV.format(ids=chr(39) + '0' + chr(39))}\n",
            "cannot name a replica",
        ),
        (
            "services:\n  a:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
            "    command: python3 -m sglang.launch_server --model-path /m\n"
            f"    {DEV.format(ids=chr(39) + '0' + chr(39))}\n"
            "    environment: {HF_TOKEN: hf_abcdefghijklmnopqrstuvwxyz0123}\n",
            "literal",
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
    result = run_cli("import", str(path), "--out", str(out))
    assert result.code == 0, result.err
    assert "equivalent" in result.err
    assert out.read_text().startswith("# Imported by `tierctl import`")
    again = run_cli("import", str(path), "--out", str(out))
    assert again.code == 2
    assert "refusing to overwrite" in again.err
    render = run_cli("render", str(out))
    assert render.code == 0


def test_engine_in_a_shell_script_is_kept_as_a_service(tmp_path: Path) -> None:
    text = _two_replicas() + (
        "  c:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
        "    command: [sh, -c, 'python3 -m sglang.launch_server --model-path /m']\n"
    )
    result = adopt([_write(tmp_path, text)], out=tmp_path / "t.yaml")
    assert "c" in result.spec.services
    assert any("shell script" in n for n in result.notes)
    assert result.differences == []
