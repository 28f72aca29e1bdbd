"""Mutation suite: change one thing in the rendered GLM example and the right contract fires.

Each case edits the good file's text (as an operator would by hand), runs ``tierctl validate``
in-process and asserts exit code 1, the rule id, a specific message, and no traceback.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import GLM_SPEC, CliResult
from tierctl.render import render_compose
from tierctl.spec import load_spec

R1 = "model-sg-glm53-w4afp8-tp4-r1"
R2 = "model-sg-glm53-w4afp8-tp4-r2"
V1 = "long-context-w4afp8-c16384-qsplit-dyntok-pdi1-h200-tp4"
V2 = "long-context-w4afp8-c16384-qsplit-dyntok-pdi2-h200-tp4"
PDI = '      - --prefill-decode-interval\n      - "{}"\n'
DYNTOK = "      - --enable-dynamic-batch-tokenizer\n"


@pytest.fixture(scope="module")
def good_text() -> str:
    return render_compose(load_spec(GLM_SPEC), spec_path=GLM_SPEC)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copy(GLM_SPEC, tmp_path / "tier.yaml")
    return tmp_path


def _section(text: str, service: str) -> tuple[int, int]:
    """Start and end offsets of one service's block in the rendered text."""
    start = text.index(f"\n  {service}:\n")
    nxt = text.find("\n  ", start + 3)
    while nxt != -1 and text[nxt + 3] == " ":
        nxt = text.find("\n  ", nxt + 1)
    return start, (nxt if nxt != -1 else len(text))


def in_service(text: str, service: str, old: str, new: str) -> str:
    """Replace ``old`` with ``new`` once, inside one service's block only."""
    start, end = _section(text, service)
    block = text[start:end]
    assert old in block, f"{old!r} not in {service}"
    return text[:start] + block.replace(old, new, 1) + text[end:]


def _run(run_cli: Callable[..., CliResult], workdir: Path, text: str, *extra: str) -> CliResult:
    path = workdir / "compose.yaml"
    path.write_text(text)
    result = run_cli("validate", "--spec", str(workdir / "tier.yaml"), str(path), *extra)
    assert "Traceback" not in result.out + result.err
    return result


def _violations(result: CliResult, rule: str) -> list[str]:
    return [line for line in result.out.splitlines() if f": {rule} " in line]


def test_rendered_example_is_clean(run_cli, workdir: Path, good_text: str) -> None:
    result = _run(run_cli, workdir, good_text)
    assert result.code == 0, result.out
    assert result.out.startswith("ok: all 7 contracts hold")


@pytest.mark.parametrize(
    ("service", "own", "other", "owner"), [(R1, "1", "2", "r2"), (R2, "2", "1", "r1")]
)
def test_replica_given_the_other_replicas_interval(
    run_cli, workdir: Path, good_text: str, service: str, own: str, other: str, owner: str
) -> None:
    text = in_service(good_text, service, PDI.format(own), PDI.format(other))
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    [argv] = _violations(result, "TC001")
    assert f"{service}: TC001 argv-pinning:" in argv
    assert f"--prefill-decode-interval expected '{own}', found '{other}' ({owner}'s value)" in argv
    start, _ = _section(text, service)
    value_line = text[: text.index(PDI.format(other), start)].count("\n") + 2
    assert argv.split(": ", 1)[0].endswith(f"compose.yaml:{value_line}")
    [label] = [v for v in _violations(result, "TC002") if "variant-truthfulness: label" in v]
    assert f"give variant '{V1 if other == '1' else V2}' - its argv/env are {owner}'s" in label


@pytest.mark.parametrize("service", [R1, R2])
def test_ingestion_flag_dropped(run_cli, workdir: Path, good_text: str, service: str) -> None:
    text = in_service(good_text, service, DYNTOK, "")
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    [argv] = _violations(result, "TC001")
    assert service in argv
    assert "missing '--enable-dynamic-batch-tokenizer'" in argv
    assert any("-qsplit-pdi" in v for v in _violations(result, "TC002"))


def test_extra_flag(run_cli, workdir: Path, good_text: str) -> None:
    text = in_service(good_text, R2, DYNTOK, DYNTOK + "      - --enable-mixed-chunk\n")
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    [argv] = _violations(result, "TC001")
    assert "unexpected '--enable-mixed-chunk' after '--enable-dynamic-batch-tokenizer'" in argv


def test_reordered_flags(run_cli, workdir: Path, good_text: str) -> None:
    pair = "      - --enable-cache-report\n      - --enable-metrics\n"
    swapped = "      - --enable-metrics\n      - --enable-cache-report\n"
    result = _run(run_cli, workdir, in_service(good_text, R1, pair, swapped))
    assert result.code == 1
    [argv] = _violations(result, "TC001")
    assert "same flags in a different order" in argv
    assert R1 in argv


def test_env_changed_on_one_replica(run_cli, workdir: Path, good_text: str) -> None:
    text = in_service(good_text, R2, 'HF_HUB_OFFLINE: "1"', 'HF_HUB_OFFLINE: "0"')
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    [env] = _violations(result, "TC003")
    assert (
        f"{R2}: TC003 shared-runtime: environment HF_HUB_OFFLINE: spec gives '1', found '0'" in env
    )
    assert "(r1 still has it)" in env


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        (f"config_variant: {V1}\n", f"config_variant: {V2}\n", "label config_variant"),
        (f'tag: "{R1}|{V1}"', f'tag: "{R1}|{V2}"', "log tag"),
    ],
)
def test_variant_place_carries_the_other_replicas_variant(
    run_cli, workdir: Path, good_text: str, old: str, new: str, what: str
) -> None:
    result = _run(run_cli, workdir, in_service(good_text, R1, old, new))
    assert result.code == 1
    [variant] = _violations(result, "TC002")
    assert f"{R1}: TC002 variant-truthfulness: {what} is" in variant
    assert "that is r2's variant" in variant


def test_scrape_config_label_wrong(run_cli, workdir: Path, good_text: str) -> None:
    old = f"container_name: {R1}\n                      config_variant: {V1}"
    assert old in good_text
    text = good_text.replace(old, old.replace("pdi1", "pdi9"))
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    [variant] = _violations(result, "TC002")
    assert "collector scrape label config_variant is" in variant
    assert "pdi9" in variant
    assert R1 in variant


def test_unpinned_image(run_cli, workdir: Path, good_text: str) -> None:
    old = '    image: "docker.io/example/sglang@sha256:'
    start, _ = _section(good_text, R2)
    line_end = good_text.index("\n", good_text.index(old, start) + 1)
    text = (
        good_text[: good_text.index(old, start)]
        + '    image: "docker.io/example/sglang:latest"'
        + good_text[line_end:]
    )
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    hygiene = _violations(result, "TC006")
    assert any(
        f"{R2}: TC006 hygiene: image 'docker.io/example/sglang:latest' is not pinned by digest" in v
        for v in hygiene
    )


def test_unknown_flag(run_cli, workdir: Path, good_text: str) -> None:
    text = in_service(good_text, R1, DYNTOK, DYNTOK + "      - --enable-warp-drive\n")
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    [flag] = _violations(result, "TC004")
    assert "--enable-warp-drive is not a flag of sglang 0.5.23" in flag


def test_bad_flag_value_type_and_choice(run_cli, workdir: Path, good_text: str) -> None:
    text = in_service(
        good_text, R1, '      - --tp-size\n      - "4"', "      - --tp-size\n      - four"
    )
    text = in_service(text, R1, "      - write_through\n", "      - write_sometimes\n")
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    flags = _violations(result, "TC004")
    assert any("--tp-size: expects an integer, found 'four'" in v for v in flags)
    assert any("'write_sometimes' is not one of the allowed choices" in v for v in flags)


def test_chunk_16384_without_the_split(run_cli, workdir: Path, good_text: str) -> None:
    text = in_service(good_text, R2, '      SGLANG_DSA_INDEXER_QSPLIT: "1"\n', "")
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    [rule] = _violations(result, "TC005")
    assert (
        f"{R2}: TC005 pairing-rule: rule chunk16k-needs-qsplit: requires env SGLANG_DSA_INDEXER_QSPLIT=1 (found: unset)"
        in rule
    )
    assert "0.04-0.65 GB free per GPU" in rule


def test_gpu_overlap(run_cli, workdir: Path, good_text: str) -> None:
    text = in_service(good_text, R2, '                - "4"\n', '                - "3"\n')
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    assert any(
        f"{R2}: TC006 hygiene: GPU 3 is also given to {R1}" in v
        for v in _violations(result, "TC006")
    )
    assert any(
        "GPUs: the spec gives 4,5,6,7, found 3,5,6,7" in v for v in _violations(result, "TC003")
    )


def test_literal_token(run_cli, workdir: Path, good_text: str) -> None:
    secret = "gw-0123456789abcdef0123"
    text = good_text.replace(
        'GATEWAY_TOKEN: "${GATEWAY_TOKEN:?set GATEWAY_TOKEN to register with the gateway}"',
        f"GATEWAY_TOKEN: {secret}",
    )
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    [hit] = _violations(result, "TC006")
    assert (
        "model-proxy-registrar: TC006 hygiene: environment GATEWAY_TOKEN holds a literal value (23 chars)"
        in hit
    )
    assert secret not in result.out + result.err


def test_a_credential_header_in_an_engine_env_is_flagged(
    run_cli, workdir: Path, good_text: str
) -> None:
    """#22: EXTRA_HEADERS holding `Authorization: Bearer ...` passed validate (the name is no
    credential name); the header inside the value is what gives it away."""
    secret = "q7Yt2mLw9XzR4aPb"
    text = in_service(
        good_text,
        R2,
        '      HF_HUB_OFFLINE: "1"\n',
        f'      HF_HUB_OFFLINE: "1"\n      EXTRA_HEADERS: "Authorization: Bearer {secret}"\n',
    )
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    [hit] = _violations(result, "TC006")
    assert f"{R2}: TC006 hygiene: environment EXTRA_HEADERS carries a credential header" in hit
    assert "Bearer ${TOKEN}" in result.out
    assert secret not in result.out + result.err


def test_a_password_in_the_registrar_url_is_flagged(run_cli, workdir: Path, good_text: str) -> None:
    """#22: a registrar URL with a password in its userinfo passed validate."""
    text = good_text.replace(
        'GATEWAY_URL: "https://gateway.example.internal/register"',
        'GATEWAY_URL: "https://registrar:Hunter2-pw@gateway.example.internal/register"',
    )
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    [hit] = _violations(result, "TC006")
    assert "environment GATEWAY_URL carries a password in a URL" in hit
    assert "Hunter2-pw" not in result.out + result.err
    # A reference in the password's place is how it should be written: clean.
    clean = good_text.replace(
        'GATEWAY_URL: "https://gateway.example.internal/register"',
        'GATEWAY_URL: "https://registrar:${GATEWAY_PASSWORD:?set it}@gateway.example.internal/x"',
    )
    assert _run(run_cli, workdir, clean).code == 0


def test_schema_violation(run_cli, workdir: Path, good_text: str) -> None:
    text = in_service(
        good_text,
        "proxy-glm53",
        "    restart: unless-stopped\n",
        "    restart: unless-stopped\n    restat: always\n",
    )
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    [schema] = _violations(result, "TC007")
    assert (
        "proxy-glm53: TC007 schema: services.proxy-glm53: unknown key 'restat' (not a compose key"
        in schema
    )


def test_missing_and_unexpected_services(run_cli, workdir: Path, good_text: str) -> None:
    text = good_text.replace("\n  dcgm-exporter:\n", "\n  dcgm-exporter-old:\n")
    result = _run(run_cli, workdir, text)
    assert result.code == 1
    hygiene = _violations(result, "TC006")
    assert any("service dcgm-exporter is in the spec but not in the file" in v for v in hygiene)
    assert any("service dcgm-exporter-old is in the file but not in the spec" in v for v in hygiene)


def test_json_format(run_cli, workdir: Path, good_text: str) -> None:
    import json

    text = in_service(good_text, R1, PDI.format("1"), PDI.format("2"))
    result = _run(run_cli, workdir, text, "--format", "json")
    assert result.code == 1
    report = json.loads(result.out)
    assert report["ok"] is False
    rules = {v["rule"] for v in report["violations"]}
    assert {"TC001", "TC002"} <= rules
    first = next(v for v in report["violations"] if v["rule"] == "TC001")
    assert first["service"] == R1
    assert first["line"] is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("services:\n  a: [1\n", "compose.yaml:3"),
        ("services:\n  a:\n    image: ${BROKEN\n", "unclosed"),
        # (a lone `$`, as in `x$ y`, is a literal in compose: not an error)
        ("services:\n  a:\n    image: x${ y}\n", "invalid interpolation format"),
        ("- just\n- a list\n", "must be a mapping"),
    ],
)
def test_unusable_compose_is_exit_2(run_cli, workdir: Path, text: str, message: str) -> None:
    result = _run(run_cli, workdir, text)
    assert result.code == 2
    assert message in result.err
    assert result.err.startswith("error: ")
