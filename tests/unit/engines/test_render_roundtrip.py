"""Law: an argv rendered by an engine's profile reads back into the same flags.

For every engine, any flag map of the pinned catalog's scalar and boolean flags (and vLLM's
positional model) renders to an argv that `command_flags` + `spec_flags` turn back into that map:
`false` survives as `--no-x` for boolean_optional flags and is absent for store_true ones.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.catalog.store import load_catalog
from tierctl.engine_catalog import Catalog
from tierctl.engines import SGLANG, VLLM, EngineProfile

CATALOGS = {"vllm": load_catalog("vllm", "0.33.0"), "sglang": load_catalog("sglang", "0.5.23")}


def _flags(cat: Catalog, kind: str) -> list[tuple[str, str]]:
    out = []
    for flag in cat.flags.values():
        if flag.deprecated or not flag.name.startswith("--") or flag.name == "--model":
            continue
        if flag.type == "bool" and flag.action in ("boolean_optional", "store_true"):
            out.append((flag.name[2:], flag.action))
        elif flag.type in ("int", "str") and flag.action is None and flag.nargs is None:
            out.append((flag.name[2:], flag.type))
    return out


def _maps(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    choices = _flags(CATALOGS[kind], kind)

    def value(kind_of: str) -> st.SearchStrategy[Any]:
        if kind_of in ("boolean_optional", "store_true"):
            return st.booleans()
        if kind_of == "int":
            return st.integers(0, 10**6)
        return st.text("abcdefghij0123456789_./", min_size=1, max_size=8)

    return st.lists(st.sampled_from(choices), max_size=8, unique_by=lambda c: c[0]).flatmap(
        lambda picked: st.fixed_dictionaries({name: value(k) for name, k in picked})
    )


def _expected(flags: dict[str, Any], cat: Catalog) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, v in flags.items():
        entry = cat.lookup(f"--{name}")
        assert entry is not None
        if v is False and entry.action != "boolean_optional":
            continue  # store_true off: no token, the engine default (off) applies
        out[name] = v if isinstance(v, bool) else str(v)
    return out


def _roundtrip(profile: EngineProfile, launcher: tuple[str, ...], flags: dict[str, Any]) -> None:
    cat = CATALOGS[profile.kind]
    argv = profile.render_argv(launcher, flags, cat)
    assert argv[: len(launcher)] == list(launcher)
    back = profile.spec_flags(profile.command_flags(argv, cat), cat)
    assert back == _expected(flags, cat), argv


@settings(max_examples=60, deadline=None)
@given(flags=_maps("vllm"), model=st.text("abcdefghij/._-", min_size=1, max_size=12))
def test_vllm_renders_and_reads_back(flags: dict[str, Any], model: str) -> None:
    model = "m" + model  # a positional never starts with a dash
    for launcher in VLLM.launchers:
        _roundtrip(VLLM, launcher, {"model": model, **flags})


@settings(max_examples=60, deadline=None)
@given(flags=_maps("sglang"))
def test_sglang_renders_and_reads_back(flags: dict[str, Any]) -> None:
    _roundtrip(SGLANG, SGLANG.launchers[0], flags)
