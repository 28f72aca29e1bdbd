"""The real engines this machine can install and run, by engine kind.

Each entry is one engine's implementation here (its virtualenv maker and its
:class:`~tierctl.realengine.engine.LocalEngine`), imported only when asked for, so
``tierctl real-engine``'s choices and the foreground server read the kinds from this one table
and a new real engine is one entry (its kind must have a profile: tested).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tierctl.realengine.engine import LocalEngine


def _ensure_vllm() -> Path:
    from tierctl.realengine.env import ensure_vllm

    return ensure_vllm()


def _ensure_sglang() -> Path:
    from tierctl.realengine.sglang import ensure_sglang

    return ensure_sglang()


def _vllm(log: Path, flags: Sequence[str], port: int) -> LocalEngine:
    from tierctl.realengine.engine import VllmEngine

    return VllmEngine(log, flags=flags, port=port, name="vllm")


def _sglang(log: Path, flags: Sequence[str], port: int) -> LocalEngine:
    from tierctl.realengine.sglang import SglangEngine

    return SglangEngine(log, flags=flags, port=port, name="sglang")


def _no_path() -> Path | None:
    return None


def _sglang_shim() -> Path | None:
    from tierctl.realengine.sglang import SHIM_DIR

    return SHIM_DIR


@dataclass(frozen=True)
class RealEngine:
    """One engine installable here: ``ensure_python`` makes (or finds) its virtualenv and
    answers its interpreter; ``server(log, flags, port)`` prepares one server process;
    ``pythonpath()`` is the folder its interpreter needs first on ``PYTHONPATH`` (None: none;
    SGLang's CPU build imports an unpublished ``sgl_kernel``, whose stand-in is tierctl's)."""

    ensure_python: Callable[[], Path]
    server: Callable[[Path, Sequence[str], int], LocalEngine]
    pythonpath: Callable[[], Path | None] = _no_path


#: The real engines, by engine kind (a registry of implementations, as ``catalog.build``'s
#: ``EXTRACTORS``: each key is a kind of ``engines.PROFILES``).
REAL_ENGINES: dict[str, RealEngine] = {
    "vllm": RealEngine(_ensure_vllm, _vllm),
    "sglang": RealEngine(_ensure_sglang, _sglang, _sglang_shim),
}


def real_engine(kind: str) -> RealEngine:
    """The real engine of ``kind``.

    Raises:
        KeyError: no real engine of that kind is installable here.
    """
    return REAL_ENGINES[kind]
