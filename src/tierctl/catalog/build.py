"""Building a flag catalog for one engine release from its wheel."""

from __future__ import annotations

import re
from pathlib import Path

from tierctl.catalog import sglang, vllm
from tierctl.catalog.model import Catalog, CatalogSource, EngineKind
from tierctl.catalog.wheel import (
    Runner,
    _run,
    default_cache_dir,
    download_wheel,
    read_members,
    sha256_of,
)
from tierctl.errors import InputError

_REF = re.compile(r"^(?P<engine>sglang|vllm)==(?P<version>[0-9][0-9A-Za-z.+-]*)$")


def parse_ref(ref: str) -> tuple[EngineKind, str]:
    """Split ``sglang==0.5.23`` into engine and version.

    Raises:
        InputError: not of the form ``sglang==X`` or ``vllm==X``.
    """
    match = _REF.match(ref.strip())
    if match is None:
        raise InputError(
            f"catalog reference {ref!r} is not ENGINE==VERSION",
            fix="write e.g. sglang==0.5.23 or vllm==0.33.0",
        )
    engine = match["engine"]
    assert engine in ("sglang", "vllm")
    return engine, match["version"]  # type: ignore[return-value]


def build_catalog(
    ref: str,
    *,
    wheel: Path | None = None,
    cache_dir: Path | None = None,
    runner: Runner = _run,
) -> Catalog:
    """Build the catalog of ``engine==version`` from its wheel, without importing it.

    Args:
        ref: ``sglang==0.5.23`` or ``vllm==0.33.0``.
        wheel: a wheel already on disk; otherwise it is downloaded with pip.
        cache_dir: where downloaded wheels are kept.
        runner: runs the pip subprocess (injected for tests).

    Raises:
        InputError: bad reference, unreadable wheel, or a wheel whose layout is not understood.
        RuntimeFailure: the download failed.
    """
    engine, version = parse_ref(ref)
    if wheel is None:
        wheel = download_wheel(engine, version, cache_dir or default_cache_dir(), runner=runner)
    elif not wheel.is_file():
        raise InputError(f"--wheel {wheel}: no such file")
    extractor = sglang if engine == "sglang" else vllm
    files = read_members(wheel, extractor.wanted)
    try:
        flags, layout, used = extractor.extract(files)
    except (ValueError, SyntaxError) as exc:
        raise InputError(f"{wheel.name}: cannot read {engine}'s flags: {exc}") from exc
    return Catalog(
        engine=engine,
        version=version,
        source=CatalogSource(
            distribution=engine,
            wheel=wheel.name,
            sha256=sha256_of(wheel),
            files=tuple(used),
            layout=layout,
        ),
        flags={flag.name: flag for flag in flags},
    )
