"""Reproducers of what the file fuzzer (``tests/file_fuzz.py``, #38 round 4) found, each
failing on the code before its fix: a credential in a fleet host's labels, ``host_label``,
``gate_host`` or file paths printed into runbooks; an image reference holding a login quoted
whole by ``validate`` and ``import``; ``import`` of manifests without an engine naming no file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult
from tests.file_fuzz import make_repo
from tierctl.credentials import mask_credentials

SECRET = "sk-5f1c0ffee0ddba11c0ffee00"


def _fleet(tmp_path: Path, **host: Any) -> Path:
    doc = {
        "fleet": "f",
        "old": "v1",
        "new": "v2",
        "hosts": [{"name": "gpu01", "file": "a.yaml", "agent_url": "http://127.0.0.1:1", **host}],
    }
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("labels", {"url": f"http://u:{SECRET}@h"}),  # fleet#1 of seed 1: in the host table
        ("labels", {f"Authorization: Bearer {SECRET}": "x"}),
        ("host_label", f"--api-key {SECRET}"),  # printed into the runbook's queries
        ("gate_host", f"http://u:{SECRET}@10.0.0.1/"),
        ("file", f"https://u:{SECRET}@git.example/gpu01/compose.yaml"),
        ("overrides", [f"gpu01/compose.yaml?token={SECRET}"]),
    ],
)
def test_a_credential_in_a_printed_host_field_is_refused_unechoed(
    run_cli: Callable[..., CliResult], tmp_path: Path, field: str, value: Any
) -> None:
    path = _fleet(tmp_path, **{field: value})
    out = tmp_path / "runbook.md"
    for args in (
        ("fleet", "plan", str(path)),
        ("runbook", "--fleet", str(path), "-o", str(out)),
    ):
        result = run_cli(*args)
        assert result.code == 2, result
        assert f"hosts.0.{field}" in result.err, result.err
        assert "credential" in result.err, result.err
        assert SECRET[3:15] not in result.out + result.err
    assert not out.exists()


def test_labels_without_a_credential_still_load(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    path = _fleet(tmp_path, labels={"role": "canary", "zone": "eu-1"}, host_label="gpu-01")
    result = run_cli("fleet", "plan", str(path))
    # It gets past the model to the repository (there is none here): not the model's error.
    assert "credential" not in result.err, result.err


_MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm}}
spec:
  selector: {{matchLabels: {{app: vllm}}}}
  template:
    metadata: {{labels: {{app: vllm}}}}
    spec:
      containers:
      - name: vllm
        image: {image}
        command: [vllm, serve, m]
"""


def test_an_image_holding_a_login_is_never_quoted(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    path = tmp_path / "deploy.yaml"
    path.write_text(_MANIFEST.format(image=f"u:{SECRET}@registry.example/vllm/vllm-openai:v0.1.0"))
    for args in (
        ("validate", "--target", "kubernetes", str(path)),
        ("validate", "--format", "json", str(path)),
        ("import", str(path)),
    ):
        result = run_cli(*args)
        assert result.code in (0, 1, 2), result
        assert "registry.example" in result.out + result.err, result  # it is named, masked
        assert SECRET[3:15] not in result.out + result.err, args


def test_masking_a_bare_login_keeps_image_digests_and_ssh_remotes() -> None:
    assert mask_credentials(f"'u:{SECRET}@registry.example/v:1'") == "'u:***@registry.example/v:1'"
    digest = "vllm/vllm-openai:v0.10.0@sha256:" + "ab" * 32
    for kept in (digest, "git@github.com:org/repo.git", "a:b@c", "http://h:1/x"):
        assert mask_credentials(kept) == kept


def test_import_without_an_engine_names_the_files(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    one = tmp_path / "svc.yaml"
    one.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n")
    two = tmp_path / "cm.yaml"
    two.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\n")
    result = run_cli("import", str(one))
    assert result.code == 2, result
    assert f"{one}: no engine container found" in result.err, result.err
    result = run_cli("import", str(one), str(two))
    assert result.code == 2, result
    assert str(one) in result.err, result.err
    assert str(two) in result.err, result.err


LONG_HOST = "h" * 300


@pytest.mark.parametrize(
    "url", [f"http://{LONG_HOST}:1", "http://a..b:1", f"http://{'é' * 63}:1", "http://.a:1"]
)
def test_an_agent_url_dns_cannot_hold_is_refused_before_any_request(
    run_cli: Callable[..., CliResult],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
) -> None:
    """Seed 2 cases 212, 1052: `rollout --fleet --dry-run` raised the resolver's UnicodeError
    ("label too long") at its first request to a 300-character agent host."""
    monkeypatch.setenv("TIERCTL_AGENT_TOKEN", SECRET)
    monkeypatch.chdir(tmp_path)
    path = _fleet(tmp_path, agent_url=url)
    result = run_cli("rollout", "--fleet", str(path), "--dry-run", "--agent-attempts", "1")
    assert result.code == 2, result
    assert "hosts.0.agent_url" in result.err, result.err
    host = _fleet(tmp_path, agent_url="http://127.0.0.1:1", prometheus=url)
    assert run_cli("fleet", "plan", str(host)).code == 2


@pytest.mark.parametrize("url", [f"http://{LONG_HOST}:1", "http://a..b:1"])
def test_a_url_option_dns_cannot_hold_is_refused(
    run_cli: Callable[..., CliResult], tmp_path: Path, url: str
) -> None:
    """The same URL given on the command line: each was a traceback at its first request."""
    from tests.conftest import EXAMPLES, SMALL_SPEC

    workload = EXAMPLES / "workloads" / "burst-hammer.yaml"
    result = run_cli("bench", "run", "--workload", str(workload), "--url", url)
    assert result.code == 2, result
    assert "no DNS name" in result.err, result.err
    result = run_cli("readout", "--spec", str(SMALL_SPEC), "--prometheus", url)
    assert result.code == 2, result
    assert "no DNS name" in result.err, result.err
    repo = make_repo(tmp_path)
    plan = tmp_path / "plan.json"
    made = run_cli(
        "plan",
        "--from",
        "git:v1:gpu01/compose.yaml",
        "--to",
        "git:v2:gpu01/compose.yaml",
        "--repo",
        str(repo),
        "-o",
        str(plan),
    )
    assert made.code == 0, made
    result = run_cli(
        "rollout",
        "--plan",
        str(plan),
        "--driver",
        "compose-manager",
        "--agent-url",
        url,
        "--repo",
        str(repo),
        "--dry-run",
        "--agent-attempts",
        "1",
    )
    assert result.code == 2, result
    assert "agent_url" in result.err or "--agent-url" in result.err, result.err


def test_dns_name_problem_matches_what_the_resolver_refuses() -> None:
    import socket

    from tierctl.netnames import dns_name_problem

    for host in (LONG_HOST, "a..b", ".a", "h" * 64, "é" * 63, ("a" * 60 + ".") * 5):
        assert dns_name_problem(host), host
    for host in ("h" * 63, "a.", "127.0.0.1", "::1", "fe80::1%eth0", "é" * 10, "a_b.c"):
        assert dns_name_problem(host) is None, host
    # Where the check says "fine", the resolver does not raise UnicodeError (it may not find
    # the name: that is an OSError the clients report).
    for host in ("h" * 63, "é" * 10):
        with pytest.raises(socket.gaierror):
            socket.getaddrinfo(host + ".invalid", 1)


@pytest.mark.parametrize(("labels", "missing"), [({}, "canary"), ({"role": "canary"}, "control")])
def test_a_fleet_readout_without_canary_or_control_hosts_names_the_fleet_file(
    run_cli: Callable[..., CliResult], tmp_path: Path, labels: dict[str, str], missing: str
) -> None:
    """Seed 20261208 case 49: "no canary host" from `readout --fleet` named no file."""
    from tests.conftest import SMALL_SPEC

    path = _fleet(tmp_path, labels=labels)
    result = run_cli(
        "readout", "--fleet", str(path), "--spec", str(SMALL_SPEC),
        "--prometheus", "http://127.0.0.1:9", "--since", "1765000000",
    )  # fmt: skip
    assert result.code == 2, result
    assert f"{path}: waves.canary: no {missing} host" in result.err, result.err


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        (b"apiVersion: v1\nkind: Service\nmetadata: {name: x}  # caf\xe9\n", "<stdin>:3:27"),
        (b"apiVersion: v1\nkind: \xff\xfe\n", "<stdin>:2:7"),
    ],
)
def test_manifests_on_stdin_that_are_no_utf8_are_refused_located(
    tmp_path: Path, data: bytes, shown: str
) -> None:
    """Seed 2 (the stdin command): bytes that are no UTF-8 on `validate -` reached PyYAML as
    lone surrogates (Python decodes stdin with surrogateescape): UnicodeEncodeError."""
    import os
    import subprocess
    import sys

    import tierctl

    env = {**os.environ, "PYTHONPATH": str(Path(tierctl.__file__).parents[1])}
    for args in (["validate", "--target", "kubernetes", "-"], ["import", "-"]):
        proc = subprocess.run(
            [sys.executable, "-m", "tierctl", *args],
            input=data, capture_output=True, cwd=tmp_path, env=env, timeout=120, check=False,
        )  # fmt: skip
        err = proc.stderr.decode()
        assert proc.returncode == 2, err
        assert "Traceback" not in err
        assert f"{shown}: not UTF-8 text" in err, err


def test_a_bom_on_stdin_is_dropped(run_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    import io
    import sys

    data = b"\xef\xbb\xbfapiVersion: v1\nkind: Service\nmetadata: {name: x}\n"
    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")
    try:
        result = run_cli("validate", "--target", "kubernetes", "-")
    finally:
        sys.stdin = old
    assert result.code == 0, result
