"""A misspelt flag that the variant template also reads: the catalog's error naming the real
mistake comes first, and the template's fix points at it instead of suggesting the typo.

Each case pins one condition of the rule (``spec.checks._misspelt_flag``): the placeholder is
a flag of the pinned release, the near miss the replicas set is not, and the unknown flag is
reported before the template problem that depends on it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import GLM_SPEC, CliResult
from tierctl.errors import SpecErrors
from tierctl.spec import load_spec_text

TEXT = GLM_SPEC.read_text(encoding="utf-8")


def _problems(text: str) -> list:  # type: ignore[type-arg]
    with pytest.raises(SpecErrors) as info:
        load_spec_text(text, "tier.yaml")
    return info.value.errors


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_base_flag_typo_the_template_reads_is_reported_as_the_unknown_flag_first():
    text = TEXT.replace("    chunked-prefill-size: 16384", "    chunked-prefil-size: 16384")
    problems = _problems(text)
    assert [p.rule for p in problems] == ["unknown-flag", "variant-template"]
    flag, template = problems
    assert flag.location.path == "engine.args.chunked-prefil-size"
    assert flag.location.line == _line_of(text, "chunked-prefil-size: 16384")
    assert "--chunked-prefil-size is not a flag of sglang 0.5.23" in flag.message
    assert "did you mean --chunked-prefill-size?" in flag.fix
    # Regression: the template's fix said "did you mean {chunked-prefil-size}?".
    assert "{chunked-prefil-size}" not in template.fix
    assert "engine.args.chunked-prefil-size" in template.fix
    assert "the template is right" in template.fix


def test_a_typo_in_the_template_still_suggests_the_flag_the_replicas_set():
    # The args are right and the catalog knows the near miss: the template is what is wrong.
    text = TEXT.replace("-c{chunked-prefill-size}", "-c{chunked-prefil-size}")
    problems = _problems(text)
    assert [p.rule for p in problems] == ["variant-template"]
    assert "did you mean {chunked-prefill-size}?" in problems[0].fix


def test_a_near_miss_when_neither_name_is_a_flag_keeps_the_template_suggestion():
    # Neither name is a flag of the release: nothing says which is the typo, so the old hint
    # stands (and the catalog check at render time reports the unknown flag).
    text = TEXT.replace("    enable-metrics: true", "    enable-metrics: true\n    my-flg: 1")
    text = text.replace("-h200-tp{tp-size}", "-h200-tp{tp-size}-{my-flag}")
    problems = _problems(text)
    assert [p.rule for p in problems] == ["variant-template"]
    assert "did you mean {my-flg}?" in problems[0].fix


def test_a_replica_override_typo_is_located_in_the_replica(tmp_path: Path):
    # Only r2 sets the flag the template reads, misspelt; r1 gets it right.
    text = TEXT.replace("    prefill-decode-interval: 1\n", "")
    text = text.replace(
        'args: {port: 30001, dist-init-addr: "127.0.0.1:29510"}',
        'args: {port: 30001, dist-init-addr: "127.0.0.1:29510", prefill-decode-interval: 1}',
    )
    text = text.replace("prefill-decode-interval: 2}", "prefill-decode-intervall: 2}")
    problems = _problems(text)
    assert [p.rule for p in problems] == ["unknown-flag", "variant-template"]
    assert problems[0].location.path == "replicas.r2.args.prefill-decode-intervall"


def test_validate_prints_the_unknown_flag_before_the_template(
    tmp_path: Path, run_cli: Callable[..., CliResult]
):
    spec = tmp_path / "tier.yaml"
    spec.write_text(TEXT.replace("    chunked-prefill-size: 16384", "    chunked-prefil-size: 1"))
    result = run_cli("validate", "--spec", str(spec))
    assert result.code == 2
    first = result.err.index("--chunked-prefil-size is not a flag")
    assert first < result.err.index("variant placeholder {chunked-prefill-size}")
    assert "did you mean {chunked-prefil-size}" not in result.err


def test_a_near_miss_that_is_a_real_flag_is_not_called_unknown():
    # The template reads {tp-size}; the args set the real flag pp-size instead: both are
    # flags of the release, so neither is a typo of the other the catalog can name.
    text = TEXT.replace("    tp-size: 4\n", "    pp-size: 4\n")
    problems = _problems(text)
    assert [p.rule for p in problems] == ["variant-template"]
    assert "did you mean {pp-size}?" in problems[0].fix
