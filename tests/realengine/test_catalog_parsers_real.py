"""Every shipped catalog against its engine's real argument parser (issue 23).

The parser is built by the engine's own code (:mod:`tierctl.catalog.parser_dump`) in the vLLM
CPU virtualenv: vLLM 0.32.0 is the installed engine itself; vLLM 0.30.0 and 0.33.0 and SGLang
0.5.9, 0.5.16 and 0.5.23 are their wheels' source (fetched into the wheel cache by
``scripts/ensure-engine-wheels``, which ``make test`` runs), imported over that virtualenv's
packages with what cannot run here stood in for. Each catalog must agree with its parser on
every flag: spellings, dest, arity, action, type, choices, default, and abbreviations as the
parser resolves them.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tierctl.catalog import sglang as sglang_extractor
from tierctl.catalog import vllm as vllm_extractor
from tierctl.catalog.parity import compare, dump_parser
from tierctl.catalog.store import data_dir, load_catalog, shipped
from tierctl.catalog.wheel import default_cache_dir, download_wheel, unpack_sources
from tierctl.engine_catalog import Catalog, Flag
from tierctl.realengine import env as realenv

pytestmark = [pytest.mark.real_engine, pytest.mark.slow]

STUBS = {"sglang": sglang_extractor.PARSER_STUBS, "vllm": vllm_extractor.PARSER_STUBS}


def _probes(catalog: Catalog) -> list[str]:
    """Abbreviations to look up: each long spelling less its last character, and cut at each
    dash (``--max-num``: ambiguous, ``--max-num-batched-token``: one flag)."""
    out: set[str] = set()
    for flag in catalog.flags.values():
        for spelling in (flag.name, *flag.aliases):
            if not spelling.startswith("--") or len(spelling) < 5:
                continue
            out.add(spelling[:-1])
            parts = spelling[2:].split("-")
            out.update("--" + "-".join(parts[:i]) for i in range(1, len(parts)))
    return sorted(out)


def _dump(python: Path, engine: str, version: str) -> dict[str, Any]:
    catalog = load_catalog(engine, version)
    installed = engine == "vllm" and version == realenv.VLLM_VERSION
    root = None
    if not installed:
        cache = default_cache_dir()
        wheel = download_wheel(catalog.source.distribution, version, cache)
        root = unpack_sources(wheel, engine, cache / "sources")
    return dump_parser(
        python,
        engine,
        root,
        stub=STUBS[engine],
        probes=_probes(catalog),
        env=realenv.engine_env(),
    )


@pytest.fixture(scope="module")
def dumps(vllm_python: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Every shipped release's real parser, built two at a time (each is a process)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {ev: pool.submit(_dump, vllm_python, *ev) for ev in shipped()}
        return {ev: f.result() for ev, f in futures.items()}


def test_every_catalog_is_compared() -> None:
    assert len(list(data_dir().glob("*.json"))) == len(shipped()) == 6


@pytest.mark.parametrize(("engine", "version"), shipped(), ids=lambda v: str(v))
def test_the_catalog_agrees_with_the_real_parser(
    dumps: dict[tuple[str, str], dict[str, Any]], engine: str, version: str
) -> None:
    catalog = load_catalog(engine, version)
    parity = compare(catalog, dumps[engine, version])
    assert parity.compared == len(catalog.flags)
    assert [str(m) for m in parity.mismatches] == []
    assert parity.not_compared == ()


@pytest.mark.parametrize(("engine", "version"), shipped(), ids=lambda v: str(v))
def test_abbreviations_resolve_as_the_real_parser_resolves_them(
    dumps: dict[tuple[str, str], dict[str, Any]], engine: str, version: str
) -> None:
    catalog = load_catalog(engine, version)
    dump = dumps[engine, version]
    assert catalog.abbreviations is dump["allow_abbrev"]
    ours: dict[str, Any] = {}
    for token in dump["probes"]:
        flag, how = catalog.resolve(token)
        ours[token] = "ambiguous" if how.startswith("ambiguous") else (flag and flag.dest)
    assert ours == dump["probes"]


def _mutated(catalog: Catalog, name: str, **changes: Any) -> Catalog:
    flags = dict(catalog.flags)
    flags[name] = dataclasses.replace(flags[name], **changes)
    return catalog.replace(flags=flags)


MUTATIONS = [
    # The false positive: a valueless flag recorded as taking a value.
    (("sglang", "0.5.23"), "--enable-dp-attention", {"nargs": None, "action": None}, "nargs"),
    (("sglang", "0.5.16"), "--disable-cuda-graph", {"nargs": None, "action": None}, "nargs"),
    (("vllm", "0.33.0"), "--max-num-seqs", {"nargs": 0}, "nargs"),
    (("vllm", "0.32.0"), "--max-num-batched-tokens", {"type": "float"}, "type"),
    (("vllm", "0.30.0"), "--kv-cache-dtype", {"choices": ("auto",)}, "choices"),
    (("sglang", "0.5.9"), "--chunked-prefill-size", {"default": 4096}, "default"),
    (("vllm", "0.33.0"), "--enable-prefix-caching", {"negations": ()}, "spellings"),
]


@pytest.mark.parametrize(("ev", "name", "changes", "field"), MUTATIONS)
def test_a_mutated_catalog_is_caught(
    dumps: dict[tuple[str, str], dict[str, Any]],
    ev: tuple[str, str],
    name: str,
    changes: dict[str, Any],
    field: str,
) -> None:
    catalog = _mutated(load_catalog(*ev), name, **changes)
    found = {(m.flag, m.field) for m in compare(catalog, dumps[ev]).mismatches}
    assert (name, field) in found


def test_a_flag_missing_from_the_catalog_is_caught(
    dumps: dict[tuple[str, str], dict[str, Any]],
) -> None:
    catalog = load_catalog("vllm", "0.32.0")
    flags: dict[str, Flag] = {n: f for n, f in catalog.flags.items() if n != "--max-model-len"}
    parity = compare(catalog.replace(flags=flags), dumps["vllm", "0.32.0"])
    assert [(m.flag, m.field) for m in parity.mismatches] == [("--max-model-len", "flag")]
