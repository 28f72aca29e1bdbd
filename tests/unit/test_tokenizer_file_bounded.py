"""``bench run --tokenizer PATH`` reads the file bounded (issue #22, session 8).

Sweep seed 90210817 input 12715 (``bench run ... --tokenizer /dev/full``) grew the worker to
4.2 GB: ``tokenizers.Tokenizer.from_file`` reads any path to its end. The file now goes through
the bounded reader first: a device or FIFO is refused at once, a file over
``TIERCTL_MAX_TOKENIZER_MB`` is refused by its size, and a real tokenizer.json still loads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tierctl.bench.prompts import TokenizerPrompts
from tierctl.errors import InputError

BUNDLED = Path(__file__).resolve().parents[2] / "src" / "tierctl" / "bundled_tokenizer.json"


def test_a_real_tokenizer_json_still_loads_and_prompts() -> None:
    prompts = TokenizerPrompts.from_file(BUNDLED)
    assert "Request 3" in prompts.prompt(40, salt=3)


def test_a_tokenizer_over_the_limit_is_refused_by_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A valid tokenizer.json padded past 1 MiB: only a size check refuses it (the tokenizers
    # library itself would load it).
    doc = json.loads(BUNDLED.read_text())
    doc["padding_note"] = "x" * (2 * 1024 * 1024)
    big = tmp_path / "tokenizer.json"
    big.write_text(json.dumps(doc))
    monkeypatch.setenv("TIERCTL_MAX_TOKENIZER_MB", "1")
    with pytest.raises(InputError) as err:
        TokenizerPrompts.from_file(big)
    assert "larger than the 1 MiB limit" in str(err.value)
    assert "TIERCTL_MAX_TOKENIZER_MB" in (err.value.fix or "")


def test_a_device_is_refused_without_reading_it() -> None:
    with pytest.raises(InputError) as err:
        TokenizerPrompts.from_file("/dev/zero")
    assert "not a regular file" in str(err.value)


def test_the_cli_refuses_dev_full_with_exit_2(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli(
        "bench", "run", "--url", "http://127.0.0.1:1", "--no-probe", "--max-duration", "3",
        "--burst", "1x10", "--tokenizer", "/dev/full",
    )  # fmt: skip
    assert result.code == 2
    assert "not a regular file" in result.err
    assert "Traceback" not in result.err
