"""Render writes the command an image's ENTRYPOINT expects (issue 23): the official
``vllm/vllm-openai`` image already runs ``vllm serve``, so its command is the arguments only;
an explicit launcher or entrypoint is written as given. Validate reads it back as it runs."""

from __future__ import annotations

from pathlib import Path

import yaml

from tierctl.contracts import validate_paths
from tierctl.render import render_compose
from tierctl.spec import load_spec

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vllm-llama70b"


def _commands(spec_path: Path) -> dict[str, list[str]]:
    doc = yaml.safe_load(render_compose(load_spec(spec_path)))
    return {
        name: svc["command"]
        for name, svc in doc["services"].items()
        if str(svc.get("image", "")).startswith("docker.io/vllm/")
    }


def test_the_70b_example_renders_arguments_only_for_vllm_openai() -> None:
    commands = _commands(EXAMPLE / "tier.yaml")
    assert commands
    for command in commands.values():
        assert command[0] == "/models/Llama-3.1-70B-Instruct"  # the positional model first
        assert "serve" not in command


def _with_launcher(tmp_path: Path, launcher: str) -> Path:
    text = (EXAMPLE / "tier.yaml").read_text(encoding="utf-8")
    text = text.replace("  kind: vllm\n", f"  kind: vllm\n  launcher: {launcher}\n", 1)
    assert f"launcher: {launcher}" in text
    spec = tmp_path / "tier.yaml"
    spec.write_text(text, encoding="utf-8")
    return spec


def test_the_images_own_launcher_is_never_written_twice(tmp_path: Path) -> None:
    for command in _commands(_with_launcher(tmp_path, "[vllm, serve]")).values():
        assert command[0] == "/models/Llama-3.1-70B-Instruct"


def test_another_launcher_is_written_as_given(tmp_path: Path) -> None:
    spec = _with_launcher(tmp_path, "[python3, -m, vllm.entrypoints.openai.api_server]")
    for command in _commands(spec).values():
        assert command[:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]


def test_the_arguments_only_rendering_validates_against_its_spec() -> None:
    report = validate_paths(EXAMPLE / "tier.yaml", [EXAMPLE / "compose.yaml"])
    assert report.ok, report.text()
