"""Catalog false positives on real argv (issue 12): each case is a command line operators run,
that the engine's own parser accepts (or refuses), checked against the shipped catalogs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tierctl.catalog.annotations import read_hints
from tierctl.catalog.argparse_calls import build_flag, flag_from_call
from tierctl.catalog.static_eval import Namespace
from tierctl.catalog.store import load_catalog
from tierctl.compose import parse_compose
from tierctl.compose.argv import parse_flags
from tierctl.contracts.flag_catalog import check_uses
from tierctl.contracts.standalone import validate_files
from tierctl.credentials import secret_positions


def _problems(ref: str, argv: list[str]) -> list[str]:
    """What validate's TC004 says about ``argv`` (the contract itself, not a copy of it)."""
    engine, version = ref.split("==")
    catalog = load_catalog(engine, version)
    compose = parse_compose("services: {}\n", source="c.yaml")
    uses = parse_flags(tuple(argv), 0, catalog)
    return [v.message for v in check_uses(catalog, compose, "svc", uses)]


ACCEPTED = [
    # argparse accepts an unambiguous prefix (allow_abbrev): SGLang's parser takes --tp 2.
    ("sglang==0.5.9", ["--model-path", "/m", "--tp", "2", "--port", "30000"]),
    ("sglang==0.5.23", ["--model-path", "/m", "--tp", "4"]),
    # vLLM's FlexibleArgumentParser maps underscores to dashes.
    (
        "vllm==0.30.0",
        ["--model", "m", "--max_model_len", "8192", "--gpu_memory_utilization", "0.9"],
    ),
    # Nested Literal: RunnerOption = Literal["auto", RunnerType] allows every RunnerType.
    ("vllm==0.30.0", ["--model", "m", "--runner", "generate"]),
    ("vllm==0.33.0", ["--model", "m", "--runner", "pooling", "--convert", "embed"]),
    # Boolean flags and their --no- spellings.
    ("vllm==0.33.0", ["--model", "m", "--no-enable-prefix-caching", "--enable-chunked-prefill"]),
    # vLLM sets one key of a JSON-valued flag with a dotted name.
    ("vllm==0.33.0", ["--model", "m", "--compilation-config.mode", "3"]),
    # vLLM 0.33's parser pairs every --enable-x boolean with a --disable-x (EnableDisableAction):
    # --disable-log-requests sets --enable-log-requests false.
    ("vllm==0.33.0", ["--model", "m", "--disable-log-requests", "--disable-prefix-caching"]),
    # SGLang's deprecated valueless flags (DeprecatedStoreTrueAction: nargs=0 in its
    # __init__, in argparse_actions.py): a DP-attention tier's argv (issue 23).
    ("sglang==0.5.23", ["--model-path", "/m", "--enable-dp-attention", "--disable-cuda-graph"]),
    ("sglang==0.5.16", ["--model-path", "/m", "--stream-output", "--disable-cuda-graph"]),
    # A deprecated flag SGLang registers with a no-value action (nargs=0 in its __init__).
    ("sglang==0.5.9", ["--model-path", "/m", "--hybrid-kvcache-ratio", "--port", "30000"]),
]


@pytest.mark.parametrize(("ref", "argv"), ACCEPTED)
def test_real_argv_the_engine_accepts_is_accepted(ref: str, argv: list[str]) -> None:
    assert _problems(ref, argv) == []


REFUSED = [
    # An ambiguous prefix is refused by argparse too.
    ("vllm==0.30.0", ["--max", "1"], "an ambiguous abbreviation of --max-"),
    # The deprecated no-value flag does not take the value after it (argparse: a stray arg).
    ("sglang==0.5.9", ["--hybrid-kvcache-ratio", "0.5"], "takes no value"),
    # SGLang does not map underscores (plain argparse).
    ("sglang==0.5.9", ["--model_path", "/m"], "--model_path is not a flag"),
    # Removed in 0.30: its parser refuses it as well (0.33's accepts it again: below).
    ("vllm==0.30.0", ["--disable-log-requests"], "--disable-log-requests is not a flag"),
    ("vllm==0.30.0", ["--runner", "bogus"], "not one of the allowed choices"),
]


@pytest.mark.parametrize(("ref", "argv", "message"), REFUSED)
def test_real_argv_the_engine_refuses_is_refused(ref: str, argv: list[str], message: str) -> None:
    problems = _problems(ref, argv)
    assert any(message in p for p in problems), problems


def test_ambiguous_abbreviation_is_named() -> None:
    catalog = load_catalog("vllm", "0.30.0")
    flag, how = catalog.resolve("--max")
    assert flag is None
    assert how.startswith("ambiguous: --max-")


def _ns(source: str) -> Namespace:
    ns = Namespace()
    ns.add_module(ast.parse(source))
    return ns


def test_nested_literal_aliases_flatten() -> None:
    ns = _ns(
        'RunnerType = Literal["generate", "pooling", "draft"]\n'
        'RunnerOption = Literal["auto", RunnerType]\n'
    )
    hints = read_hints(ast.parse("RunnerOption", mode="eval").body, ns)
    assert hints.literals == ["auto", "generate", "pooling", "draft"]


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("1024 * 1024", 1048576),
        ("10 ** 7", 10000000),
        ("MB * 16", 16777216),
        ("-1", -1),
        ("4 << 10", 4096),
        ("BASE // 2", 512),
    ],
)
def test_defaults_by_arithmetic_and_constants(expr: str, value: int) -> None:
    ns = _ns("MB = 1024 * 1024\nBASE = 1024\n")
    assert ns.evaluate(ast.parse(expr, mode="eval").body) == value


def test_custom_action_class_nargs_zero_takes_no_value() -> None:
    source = (
        "class DeprecatedAction(argparse.Action):\n"
        "    def __init__(self, option_strings, dest, nargs=0, **kwargs):\n"
        "        super().__init__(option_strings, dest, nargs=nargs, **kwargs)\n"
        "parser.add_argument('--old-flag', action=DeprecatedAction, help='Deprecated.')\n"
    )
    tree = ast.parse(source)
    ns = Namespace()
    ns.add_module(tree)
    call = tree.body[1].value  # type: ignore[attr-defined]
    flag = flag_from_call(call, ns)
    assert flag is not None
    assert flag.nargs == 0
    assert not flag.takes_value()
    assert flag.deprecated


def test_one_builder_for_both_engines() -> None:
    # vLLM's builder passes plain keyword values; SGLang's evaluates source first; both end
    # in build_flag, so the same keywords give the same flag.
    plain = build_flag("--x", ["--x"], "x", {"type": "int", "default": 4, "help": "X."})
    ns = Namespace()
    call = ast.parse("p.add_argument('--x', type=int, default=4, help='X.')").body[0].value  # type: ignore[attr-defined]
    assert flag_from_call(call, ns) == plain


# Issue 23: abbreviations resolve as each engine's argparse resolves them (allow_abbrev is on
# in both parsers: tests/realengine/test_catalog_parsers_real.py probes the real ones).
@pytest.mark.parametrize(
    ("ref", "token", "flag"),
    [
        ("vllm==0.33.0", "--max-num-batched-token", "--max-num-batched-tokens"),
        ("vllm==0.32.0", "--max_num_batched_token", "--max-num-batched-tokens"),
        ("vllm==0.30.0", "--gpu-memory-util", "--gpu-memory-utilization"),
        ("sglang==0.5.23", "--chunked-prefill-siz", "--chunked-prefill-size"),
        ("sglang==0.5.9", "--mem-fraction", "--mem-fraction-static"),
    ],
)
def test_an_unambiguous_prefix_is_its_flag(ref: str, token: str, flag: str) -> None:
    engine, version = ref.split("==")
    found = load_catalog(engine, version).lookup(token)
    assert found is not None
    assert found.name == flag
    value = "0.8" if "fraction" in flag or "util" in flag else "4096"
    assert _problems(ref, [token, value]) == []


def test_an_abbreviated_flag_ending_in_token_is_not_a_credential(tmp_path: Path) -> None:
    # The reproducer: `4096` was called "a literal credential" (the abbreviation ends
    # in "token"), and import refused the file.
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  v:\n    image: vllm/vllm-openai:v0.33.0\n"
        "    command: [m, --max-num-batched-token, '4096', --hf-tok, hf_abcdefghijklmnopqrstu1234]\n",
        encoding="utf-8",
    )
    report = validate_files([compose])
    secrets = [v for v in report.violations if "credential" in v.message]
    # The abbreviation of --hf-token still carries one: only that token is reported.
    assert [v.message.split(" is ")[0] for v in secrets] == ["command token 4"]


def test_secret_positions_read_a_flag_as_the_engine_does() -> None:
    catalog = load_catalog("vllm", "0.33.0")
    argv = ["--max-num-batched-token", "4096"]
    assert secret_positions(argv) == [(1, "4096")]  # a bare name ending in "token"
    resolve = lambda t: f.name if (f := catalog.lookup(t)) else t  # noqa: E731
    assert secret_positions(argv, resolve) == []
