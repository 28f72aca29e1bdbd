"""The committed catalogs: the flags the field reports depend on, and cross-release lookups."""

from __future__ import annotations

import pytest

from tierctl.catalog.store import diff_catalogs, flag_history, load_catalog, shipped, version_key
from tierctl.errors import InputError


def test_sglang_0_5_23_has_the_scheduler_and_tokenizer_flags() -> None:
    cat = load_catalog("sglang", "0.5.23")
    pdi = cat.flags["--prefill-decode-interval"]
    assert (pdi.type, pdi.default, pdi.takes_value()) == ("int", None, True)
    dyntok = cat.flags["--enable-dynamic-batch-tokenizer"]
    assert (dyntok.type, dyntok.default, dyntok.action) == ("bool", False, "store_true")
    assert not dyntok.takes_value()
    assert cat.flags["--dynamic-batch-tokenizer-batch-size"].default == 32
    timeout = cat.flags["--dynamic-batch-tokenizer-batch-timeout"]
    assert (timeout.type, timeout.default) == ("float", 0.002)
    assert cat.flags["--chunked-prefill-size"].type == "int"


def test_aliases_and_choices_are_recorded() -> None:
    cat = load_catalog("sglang", "0.5.23")
    assert cat.lookup("--tensor-parallel-size") is cat.flags["--tp-size"]
    policy = cat.flags["--schedule-policy"]
    assert policy.default == "fcfs"
    assert policy.choices is not None
    assert "lpm" in policy.choices


def test_enough_releases_are_shipped() -> None:
    engines = [engine for engine, _ in shipped()]
    assert engines.count("sglang") >= 3
    assert engines.count("vllm") >= 2


def test_vllm_catalog_has_boolean_optional_flags() -> None:
    cat = load_catalog("vllm", "0.33.0")
    prefix = cat.flags["--enable-prefix-caching"]
    assert prefix.action == "boolean_optional"
    assert cat.lookup("--no-enable-prefix-caching") is prefix
    assert cat.flags["--port"].default == 8000
    assert cat.lookup("-tp") is cat.flags["--tensor-parallel-size"]


def test_flag_added_in_a_later_release_is_found() -> None:
    history = flag_history("sglang", "0.5.16", "--prefill-decode-interval")
    assert history.added_in == "0.5.23"
    assert history.last_seen is None


def test_diff_reports_the_new_scheduler_flag() -> None:
    result = diff_catalogs(load_catalog("sglang", "0.5.16"), load_catalog("sglang", "0.5.23"))
    assert "--prefill-decode-interval" in {f.name for f in result.added}
    assert "--prefill-decode-interval" not in {f.name for f in result.removed}


def test_missing_catalog_is_an_input_error_naming_the_shipped_ones() -> None:
    with pytest.raises(InputError, match=r"sglang==0\.5\.23"):
        load_catalog("sglang", "9.9.9")


def test_versions_sort_numerically() -> None:
    assert sorted(["0.5.16", "0.5.9", "0.5.23"], key=version_key) == ["0.5.9", "0.5.16", "0.5.23"]


def test_vllm_config_object_flags_take_json() -> None:
    cat = load_catalog("vllm", "0.33.0")
    assert cat.flags["--compilation-config"].type == "json"
    assert cat.lookup("-cc") is cat.flags["--compilation-config"]
