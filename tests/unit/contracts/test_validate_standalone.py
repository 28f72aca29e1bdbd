"""``tierctl validate COMPOSE`` without a spec: what it finds, what it rejects, what it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tierctl.contracts.standalone import validate_files

GPU = "deploy: {{resources: {{reservations: {{devices: [{{driver: nvidia, device_ids: [{ids}], capabilities: [gpu]}}]}}}}}}"


def _file(tmp_path: Path, text: str, name: str = "compose.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _sglang(name: str, ids: str, flags: str, extra: str = "") -> str:
    return (
        f"  {name}:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
        f"    command: python3 -m sglang.launch_server --model-path /m {flags}\n"
        f"    {GPU.format(ids=ids)}\n{extra}"
    )


def test_clean_file_is_ok_and_names_what_it_could_not_check(tmp_path: Path) -> None:
    path = _file(tmp_path, "services:\n" + _sglang("a", "'0', '1'", "--tp-size 2 --port 30000"))
    report = validate_files([path])
    assert report.ok, report.text()
    assert report.catalog == "sglang==0.5.9"
    assert report.replicas_checked == 1
    assert any("TC001" in u and "spec" in u for u in report.unchecked)
    # Unpinned images warn, and fail only with strict.
    assert report.warnings
    assert not validate_files([path], strict=True).ok


def test_tp_times_dp_against_the_gpus_given(tmp_path: Path) -> None:
    path = _file(tmp_path, "services:\n" + _sglang("a", "'0', '1'", "--tp-size 2 --dp-size 2"))
    report = validate_files([path])
    [v] = report.violations
    assert "needs 4 GPUs" in v.message
    assert "given only 2" in v.message
    assert v.fix is not None
    assert v.location is not None
    assert v.location.line == 5  # the deploy key


def test_dp_attention_runs_inside_the_tp_group(tmp_path: Path) -> None:
    flags = "--tp-size 2 --dp-size 2 --enable-dp-attention"
    report = validate_files([_file(tmp_path, "services:\n" + _sglang("a", "'0', '1'", flags))])
    assert report.ok, report.text()


def test_overlapping_gpus_and_host_ports(tmp_path: Path) -> None:
    text = (
        "services:\n"
        + _sglang("a", "'0'", "--port 30000", "    ports: ['30000:30000']\n")
        + _sglang("b", "'0'", "--port 30000", "    ports: ['30000:30000']\n")
    )
    report = validate_files([_file(tmp_path, text)])
    messages = [v.message for v in report.violations]
    assert any("GPU 0 is also given to a" in m for m in messages)
    assert any("host port 30000 is also used by a" in m for m in messages)


def test_unknown_flag_gets_did_you_mean(tmp_path: Path) -> None:
    path = _file(tmp_path, "services:\n" + _sglang("a", "'0'", "--mem-fraction-statc 0.8"))
    [v] = validate_files([path]).violations
    assert v.rule == "TC004"
    assert v.fix is not None
    assert "--mem-fraction-static" in v.fix


def test_vllm_image_entrypoint_flags_are_checked(tmp_path: Path) -> None:
    text = (
        "services:\n  v:\n    image: vllm/vllm-openai:v0.33.0\n"
        "    command: ['--model', 'm', '--max-num-seqs', 'many']\n"
        f"    {GPU.format(ids=chr(39) + '0' + chr(39))}\n"
    )
    [v] = validate_files([_file(tmp_path, text)]).violations
    assert "--max-num-seqs" in v.message
    assert "integer" in v.message
    # The token is located in the command list (index 3), not shifted by the entrypoint.
    assert v.location is not None
    assert v.location.path == "services.v.command[2]"


def test_no_catalog_for_the_tag_is_named_and_engine_option_picks_one(tmp_path: Path) -> None:
    text = (
        "services:\n  a:\n    image: lmsysorg/sglang:v0.4.9.post2-cu126\n"
        "    command: python3 -m sglang.launch_server --model-path /m --bogus-flag\n"
        f"    {GPU.format(ids=chr(39) + '0' + chr(39))}\n"
    )
    path = _file(tmp_path, text)
    report = validate_files([path])
    # Checked against the newest shipped release, and said so (issue 23), not left unchecked.
    assert [v.found for v in report.violations] == ["--bogus-flag"]
    assert "(sglang==0.5.23)" in report.violations[0].message or "0.5.23" in str(
        report.violations[0].message
    )
    [note] = [w for w in report.warnings if w.rule == "TC004"]
    assert note.message == (
        "flags checked against sglang 0.5.23, the newest shipped catalog; no shipped catalog "
        "for sglang 0.4.9.post2 (tag 'v0.4.9.post2-cu126')"
    )
    assert note.location is not None
    assert note.location.path == "services.a.image"
    forced = validate_files([path], engine="sglang==0.5.9")
    assert [v.found for v in forced.violations] == ["--bogus-flag"]
    assert not [w for w in forced.warnings if w.rule == "TC004"]


@pytest.mark.parametrize(
    "image",
    ["vllm/vllm-openai:latest", "vllm/vllm-openai:main", "${IMG:-vllm/vllm-openai}", "vllm"],
)
def test_a_tag_naming_no_release_is_checked_against_the_newest_shipped_one(
    tmp_path: Path, image: str
) -> None:
    text = (
        f"services:\n  v:\n    image: {json.dumps(image)}\n    command: [m, --max-num-seqs, lots]\n"
    )
    report = validate_files([_file(tmp_path, text)])
    [bad] = [v for v in report.violations if v.rule == "TC004"]
    assert "expects an integer" in bad.message
    assert "vllm==0.33.0" in bad.message
    [note] = [w for w in report.warnings if w.rule == "TC004"]
    assert note.message.startswith("flags checked against vllm 0.33.0, the newest shipped")


def test_a_doubled_launcher_on_the_official_vllm_image_is_reported(tmp_path: Path) -> None:
    text = (
        "services:\n  v:\n    image: vllm/vllm-openai:v0.33.0\n"
        "    command:\n      - vllm\n      - serve\n      - m\n"
        "  ok:\n    image: vllm/vllm-openai:v0.33.0\n    command: [m]\n"
        "  own:\n    image: vllm/vllm-openai:v0.33.0\n    entrypoint: []\n"
        "    command: [vllm, serve, m]\n"
        "  sg:\n    image: lmsysorg/sglang:v0.5.23\n"
        "    command: [python3, -m, sglang.launch_server, --model-path, m]\n"
    )
    report = validate_files([_file(tmp_path, text)])
    [v] = [v for v in report.violations if "entrypoint already runs" in v.message]
    assert v.service == "v"
    assert v.found == "vllm serve"
    assert "vllm serve vllm serve" in v.message
    assert "drop `vllm serve`" in v.fix
    assert v.location is not None
    assert v.location.line == 5


def test_undeclared_volume_network_secret_are_compose_errors(tmp_path: Path) -> None:
    text = (
        "services:\n  x:\n    image: nginx:1.27\n    volumes: ['data:/d', './bind:/b']\n"
        "    networks: [front]\n    secrets: [tok]\n"
    )
    report = validate_files([_file(tmp_path, text)])
    found = sorted(v.found for v in report.violations if v.rule == "TC007" and v.found)
    assert found == ["data", "front", "tok"]


def test_command_cut_by_a_semicolon_is_reported(tmp_path: Path) -> None:
    text = "services:\n  x:\n    image: busybox:1.36\n    command: sh -c echo a; echo b\n"
    [v] = validate_files([_file(tmp_path, text)]).violations
    assert "drops '; echo b'" in v.message


def test_count_all_is_named_not_guessed(tmp_path: Path) -> None:
    text = (
        "services:\n  v:\n    image: vllm/vllm-openai:v0.30.0\n"
        "    command: --model m --tensor-parallel-size 4\n"
        "    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all, "
        "capabilities: [gpu]}]}}}\n"
    )
    report = validate_files([_file(tmp_path, text)])
    assert report.ok
    assert any("count: all" in u and "needs 4" in u for u in report.unchecked)


def test_cli_without_spec_json(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    path = _file(tmp_path, "services:\n" + _sglang("a", "'0'", "--tp-size 2"))
    result = run_cli("validate", "--format", "json", str(path))
    assert result.code == 1
    doc = json.loads(result.out)
    assert doc["violations"][0]["fix"]
    assert doc["unchecked"]


def test_cli_needs_spec_or_files(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("validate")
    assert result.code == 2
    assert "nothing to validate" in result.err


@pytest.mark.parametrize("bad", ["sglang", "nope==1"])
def test_bad_engine_option_is_exit_2(tmp_path: Path, run_cli, bad: str) -> None:  # type: ignore[no-untyped-def]
    path = _file(tmp_path, "services:\n" + _sglang("a", "'0'", ""))
    assert run_cli("validate", "--engine", bad, str(path)).code == 2


def test_engine_started_inside_a_shell_script_is_checked(tmp_path: Path) -> None:
    text = (
        "services:\n  a:\n    image: lmsysorg/sglang:v0.5.9-cu126\n"
        "    command: [bash, -c, 'pip install -q x && python3 -m sglang.launch_server"
        " --model-path /m --tp-size 2 --mem-fraction-statc 0.8']\n"
        f"    {GPU.format(ids=chr(39) + '0' + chr(39))}\n"
    )
    report = validate_files([_file(tmp_path, text)])
    found = {v.found for v in report.violations}
    assert "--mem-fraction-statc" in found
    assert any("needs 2 GPUs" in v.message for v in report.violations)
    [flag] = [v for v in report.violations if v.found == "--mem-fraction-statc"]
    assert flag.location is not None
    assert flag.location.path == "services.a.command[2]"


@pytest.mark.parametrize(
    ("a", "b", "clash"),
    [
        ("'127.0.0.1:30000:30000'", "'10.0.0.1:30000:30000'", False),  # two addresses
        ("'30000:30000/udp'", "'30000:30000'", False),  # udp and tcp
        ("'0.0.0.0:30000:30000'", "'127.0.0.1:30000:30000'", True),  # wildcard overlaps
        ("'${A:-9000}:80'", "'9000:80'", True),  # the default is the port
        ("'30000-30001:30000-30001'", "'30001:30001'", True),  # inside a range
    ],
)
def test_host_ports_compared_as_compose_binds_them(
    tmp_path: Path, a: str, b: str, clash: bool
) -> None:
    text = (
        "services:\n"
        + _sglang("a", "'0'", "--port 30000", f"    ports: [{a}]\n")
        + _sglang("b", "'1'", "--port 30000", f"    ports: [{b}]\n")
    )
    messages = [v.message for v in validate_files([_file(tmp_path, text)]).violations]
    assert any("host port" in m for m in messages) == clash, messages


def test_a_default_credential_is_reported_as_a_default(tmp_path: Path) -> None:
    """``${X:-admin}`` is a default credential, not "a literal where a reference belongs"
    (the file has a reference); the value never reaches the report."""
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n  db:\n    image: postgres:16\n"
        "    environment: {POSTGRES_PASSWORD: '${PG_PASS:-admin-pw-2024}'}\n"
    )
    report = validate_files([path])
    (violation,) = [v for v in report.violations if v.service == "db"]
    assert "defaults to a literal credential when PG_PASS is unset" in violation.message
    assert "reference belongs" not in violation.message
    assert "${PG_PASS:?set PG_PASS}" in (violation.fix or "")
    assert "admin-pw-2024" not in report.text()


def _ports_file(tmp_path: Path, name: str, ports: str, image: bool = True) -> Path:
    body = "    image: busybox\n" if image else ""
    return _file(tmp_path, f"services:\n  web:\n{body}    ports: {ports}\n", name)


def test_compose_refusing_two_ports_as_equal_one_way_round_is_a_located_tc007(
    tmp_path: Path,
) -> None:
    """``published: "8000"`` then ``published: 8000``: Compose's schema check calls them equal
    (only in that order); validate reports it under TC007 at the ports key, without a binary."""
    path = _ports_file(
        tmp_path, "compose.yaml", '[{target: 80, published: "8000"}, {target: 80, published: 8000}]'
    )
    report = validate_files([path])
    [v] = [v for v in report.violations if v.rule == "TC007"]
    assert v.message.startswith("services.web.ports: ports items 0 and 1")
    assert "a number equals an earlier string" in v.message
    assert v.location is not None
    assert v.location.line == 4
    assert v.location.file == str(path)
    assert v.fix
    assert "published the same way" in v.fix
    # The other order is two ports to Compose: nothing to report.
    other = _ports_file(
        tmp_path, "other.yaml", '[{target: 80, published: 8000}, {target: 80, published: "8000"}]'
    )
    assert not [v for v in validate_files([other]).violations if v.rule == "TC007"]


def test_an_override_that_makes_the_merged_ports_equal_is_located_in_the_override(
    tmp_path: Path,
) -> None:
    base = _ports_file(tmp_path, "compose.yaml", '[{target: 80, published: "8000"}]')
    over = _ports_file(tmp_path, "over.yaml", "[{target: 80, published: 8000}]", image=False)
    [v] = [v for v in validate_files([base, over]).violations if v.rule == "TC007"]
    assert v.location is not None
    assert v.location.file == str(over)
    assert "ports items 0 and 1" in v.message


def test_a_list_the_schema_already_reports_is_reported_once(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "services:\n  web:\n    image: busybox\n    security_opt: [a, a]\n",
    )
    found = [v for v in validate_files([path]).violations if v.rule == "TC007"]
    assert len(found) == 1, [v.message for v in found]
    assert found[0].message.startswith("services.web.security_opt")
