"""The catalog commands as an operator runs them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import CliResult


def test_list_names_every_shipped_catalog(run_cli) -> None:
    result: CliResult = run_cli("catalog", "list")
    assert result.code == 0
    refs = [line.split("\t")[0] for line in result.out.splitlines()]
    assert refs == [
        "sglang==0.5.9",
        "sglang==0.5.16",
        "sglang==0.5.23",
        "vllm==0.30.0",
        "vllm==0.32.0",
        "vllm==0.33.0",
    ]


def test_show_one_flag_as_json(run_cli) -> None:
    result = run_cli(
        "catalog",
        "show",
        "sglang==0.5.23",
        "--flag",
        "dynamic-batch-tokenizer-batch-size",
        "--format",
        "json",
    )
    assert result.code == 0
    flag = json.loads(result.out)
    assert (flag["type"], flag["default"]) == ("int", 32)


def test_show_unknown_flag_is_exit_2(run_cli) -> None:
    result = run_cli("catalog", "show", "sglang==0.5.16", "--flag", "prefill-decode-interval")
    assert result.code == 2
    assert result.err == "error: sglang==0.5.16 has no flag --prefill-decode-interval\n"


def test_diff_lists_added_flags(run_cli) -> None:
    result = run_cli("catalog", "diff", "sglang==0.5.16", "sglang==0.5.23")
    assert result.code == 0
    assert "+ --prefill-decode-interval\tint\tdefault=null" in result.out.splitlines()
    assert result.out.splitlines()[-1].startswith("sglang==0.5.16 -> sglang==0.5.23: ")


def test_build_from_a_local_wheel_writes_a_loadable_catalog(run_cli, tmp_path: Path) -> None:
    import zipfile

    wheel = tmp_path / "sglang-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(
            "sglang/srt/server_args.py",
            "class ServerArgs:\n    def add_cli_args(parser):\n"
            "        parser.add_argument('--port', type=int, default=30000)\n",
        )
    out = tmp_path / "cat.json"
    result = run_cli(
        "catalog", "build", "sglang==0.0.1", "--wheel", str(wheel), "--output", str(out)
    )
    assert result.code == 0
    assert "sglang==0.0.1: 1 flags" in result.out
    shown = run_cli("catalog", "show", str(out), "--flag", "--port")
    assert "default: 30000" in shown.out


def test_bad_reference_is_exit_2(run_cli) -> None:
    result = run_cli("catalog", "show", "sglang@0.5.23")
    assert result.code == 2
    assert "neither ENGINE==VERSION nor a catalog file" in result.err
