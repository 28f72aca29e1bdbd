"""The real SGLang's set-up, without the engine: scripts/ensure-sglang and
:mod:`tierctl.realengine.sglang` agree on the pinned versions and the venv, and the engine's
command and environment are the CPU host's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tierctl.engines.sglang import CPU_HOST_ENV, CPU_HOST_FLAGS
from tierctl.realengine import sglang as realsglang

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure-sglang"


def _var(name: str) -> str:
    match = re.search(rf"^{name}=(\S+)$", SCRIPT.read_text(), re.MULTILINE)
    assert match, name
    return match[1]


def test_the_script_and_the_module_pin_the_same_install() -> None:
    assert _var("SGLANG_VERSION") == realsglang.SGLANG_VERSION
    assert _var("TORCH_VERSION") == realsglang.TORCH_VERSION
    assert _var("ROUTER_VERSION") == realsglang.ROUTER_VERSION
    assert _var("RECIPE") == realsglang.RECIPE
    text = SCRIPT.read_text()
    assert "tierctl/sglang-${SGLANG_VERSION}-t${TORCH_VERSION}-r${ROUTER_VERSION}}" in text
    stamp = "-installed-sglang-${SGLANG_VERSION}-torch-${TORCH_VERSION}-sglang-router-"
    assert stamp in text
    assert realsglang.ensure_script() == SCRIPT


def test_the_venv_path_and_its_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TIERCTL_SGLANG_VENV", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert realsglang.venv_dir() == tmp_path / "tierctl" / "sglang-0.5.23-t2.14.1-r0.3.2"
    assert realsglang.sglang_python() is None  # nothing installed there
    monkeypatch.setenv("TIERCTL_SGLANG_VENV", str(tmp_path / "v"))
    venv = tmp_path / "v"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    assert realsglang.sglang_python() is None  # no stamp: an unfinished install
    (venv / ".tierctl-installed-sglang-0.5.23-torch-2.14.1-sglang-router-0.3.2-recipe-1").touch()
    assert realsglang.sglang_python() == venv / "bin" / "python"


def test_the_engine_runs_offline_on_the_cpu_platform_with_the_stand_in() -> None:
    env = realsglang.engine_env({"PATH": "/bin", "PYTHONPATH": "/elsewhere", "HOME": "/h"})
    assert env["PYTHONPATH"] == str(realsglang.SHIM_DIR)
    assert (realsglang.SHIM_DIR / "sgl_kernel" / "__init__.py").is_file()
    for key, value in CPU_HOST_ENV.items():
        assert env[key] == value
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["TRANSFORMERS_OFFLINE"] == "1"


def test_the_command() -> None:
    argv = realsglang.engine_argv(Path("/py"), Path("/m"), 31000, ("--enable-metrics",))
    assert argv[:3] == ["/py", "-m", "sglang.launch_server"]
    assert argv[argv.index("--model-path") + 1] == "/m"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--port") + 1] == "31000"
    joined = " ".join(argv)
    assert " ".join(CPU_HOST_FLAGS) in joined
    assert " ".join(realsglang.BASE_FLAGS) in joined
    assert argv[-1] == "--enable-metrics"
