"""Reproducers of issue #38 (hostile input, round 4) and #42, each through the CLI: fleet
files whose agent URL holds a credential or a port no client can use, an unknown fleet key
holding a secret, credentials inside one engine-argument string (``sh -c``, ``EXTRA_ARGS``).

Every bad input is a located error (exit 2, no traceback) and no secret comes back in any
encoding (``tests.secret_search``: raw, URL, JSON, base64, hex and 8-character fragments).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import EXAMPLES, CliResult
from tests.secret_search import holds_any

RunCli = Callable[..., CliResult]
SECRET = "hunter2pw-0123456789"


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@x")
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A deployment repository: one host's compose file at v1 and v2 (r2 gains a flag)."""
    root = tmp_path_factory.mktemp("fleet") / "repo"
    (root / "gpu01").mkdir(parents=True)
    text = (EXAMPLES / "small-model" / "compose.yaml").read_text()
    (root / "gpu01" / "compose.yaml").write_text(text)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "v1")
    _git(root, "tag", "v1")
    at = text.rindex("      - --enable-metrics")
    (root / "gpu01" / "compose.yaml").write_text(text[:at] + "      - --log-requests\n" + text[at:])
    _git(root, "commit", "-qam", "v2")
    _git(root, "tag", "v2")
    return root


def _fleet(tmp: Path, repo: Path, url: str, **extra: object) -> Path:
    host: dict[str, object] = {"name": "gpu01", "file": "gpu01/compose.yaml", "agent_url": url}
    host.update(extra)
    doc = {"fleet": "f", "repo": str(repo), "old": "v1", "new": "v2", "hosts": [host]}
    path = tmp / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


_COMMANDS = [
    ("fleet", "plan"),
    ("runbook", "-o", "{out}", "--fleet"),
    ("rollout", "--journal", "{journal}", "--fleet"),
]

_URLS = {
    "userinfo": f"http://user:{SECRET}@127.0.0.1:1",
    "token query": f"http://127.0.0.1:1/?token={SECRET}",
    "port 99999": "http://127.0.0.1:99999",
    "port -1": "http://127.0.0.1:-1",
    "port '1 '": "http://127.0.0.1:1 ",
    "open bracket": "http://[::1",
    "port +1": "http://127.0.0.1:+1",
    "port 0": "http://127.0.0.1:0",
}


@pytest.mark.parametrize("command", _COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("name", list(_URLS))
def test_a_bad_agent_url_is_a_located_error_that_echoes_no_secret(
    run_cli: RunCli, repo: Path, tmp_path: Path, command: tuple[str, ...], name: str
) -> None:
    path = _fleet(tmp_path, repo, _URLS[name])
    out, journal = tmp_path / "runbook.md", tmp_path / "journal.jsonl"
    argv = [a.format(out=out, journal=journal) for a in command]
    os.environ.setdefault("TIERCTL_AGENT_TOKEN", "t" * 24)
    result = run_cli(*argv, str(path))
    assert result.code == 2, (result.out, result.err)
    assert "Traceback" not in result.err
    assert f"{path}:" in result.err
    assert "hosts.0.agent_url" in result.err
    written = [p.read_text() for p in (out, journal) if p.exists()]
    assert not holds_any(result.out + result.err + "".join(written), [SECRET])


def test_a_good_agent_url_still_plans(run_cli: RunCli, repo: Path, tmp_path: Path) -> None:
    for url in ("http://[::1]:8765", "https://gpu01.example:8765/agent", "http://gpu01"):
        result = run_cli("fleet", "plan", str(_fleet(tmp_path, repo, url)))
        assert result.code == 0, (url, result.err)


def test_an_unknown_key_never_echoes_its_value(run_cli: RunCli, repo: Path, tmp_path: Path) -> None:
    path = _fleet(tmp_path, repo, "http://127.0.0.1:1", password=SECRET)
    result = run_cli("fleet", "plan", str(path))
    assert result.code == 2
    assert "unknown key 'password'" in result.err
    assert "hosts.0.password" in result.err
    assert not holds_any(result.out + result.err, [SECRET])


def test_a_prometheus_url_with_a_bad_port_is_located(
    run_cli: RunCli, repo: Path, tmp_path: Path
) -> None:
    path = _fleet(tmp_path, repo, "http://127.0.0.1:1", prometheus="http://prom:99999")
    result = run_cli("fleet", "plan", str(path))
    assert result.code == 2
    assert "Traceback" not in result.err
    assert "hosts.0.prometheus" in result.err


# --- credentials inside one engine-argument string ------------------------------------------

KEY = "sk-abcdef0123456789abcdef"
_DEPLOYMENT = (Path(__file__).resolve().parents[1] / "fixtures" / "kube_corpus").joinpath(
    "10-plain-deployment-vllm.yaml"
)


def _manifest(tmp: Path, edit: Callable[[str], str]) -> Path:
    path = tmp / "m.yaml"
    path.write_text(edit(_DEPLOYMENT.read_text()))
    return path


def _extra_args(value: str) -> Callable[[str], str]:
    return lambda t: t.replace(
        "          env:\n",
        f'          env:\n            - name: EXTRA_ARGS\n              value: "{value}"\n',
    )


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace(
            "--max-num-batched-tokens 1024", f"--max-num-batched-tokens 1024 --api-key {KEY}"
        ),
        _extra_args(f"--api-key {KEY}"),
        _extra_args(f"--api-key={KEY} --max-num-seqs 8"),
    ],
    ids=["sh -c", "EXTRA_ARGS", "EXTRA_ARGS ="],
)
def test_an_api_key_inside_one_argument_string_fails_validate(
    run_cli: RunCli, tmp_path: Path, edit: Callable[[str], str]
) -> None:
    result = run_cli("validate", str(_manifest(tmp_path, edit)))
    assert result.code == 1, result.out
    assert "TC006" in result.out
    assert "credential" in result.out
    assert not holds_any(result.out + result.err, [KEY])


def test_tc004_shows_no_value_tc006_would_mask(run_cli: RunCli, tmp_path: Path) -> None:
    """A stray value before any flag in EXTRA_ARGS, shaped like a key: TC004 names it
    without its text."""
    result = run_cli("validate", str(_manifest(tmp_path, _extra_args(f"{KEY} --port 1"))))
    assert result.code == 1
    assert "stray value (a credential: not shown)" in result.out
    assert not holds_any(result.out + result.err, [KEY])


def test_an_api_key_in_a_compose_entrypoint_string_fails_validate(
    run_cli: RunCli, tmp_path: Path
) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n  e:\n    image: vllm/vllm-openai:v0.10.0\n"
        f'    entrypoint: ["sh", "-c", "vllm serve m --api-key {KEY}"]\n'
        "    deploy: {resources: {reservations: {devices: "
        '[{driver: nvidia, device_ids: ["0"], capabilities: [gpu]}]}}}\n'
    )
    result = run_cli("validate", str(path), "--no-compose-binary")
    assert result.code == 1
    assert "entrypoint token 2 carries a credential flag's value" in result.out
    assert not holds_any(result.out + result.err, [KEY])


# --- names that reach the file system ---------------------------------------------------


@pytest.mark.parametrize(
    ("head", "key"),
    [
        ("apiVersion: v1\nkind: " + "K" * 300, "kind"),
        ("apiVersion: apps/v1\nkind: Deployment../../x", "kind"),
        ("apiVersion: " + "a" * 300 + "/v1\nkind: Deployment", "apiVersion"),
    ],
    ids=["300-character kind", "kind with a path", "300-character apiVersion"],
)
def test_a_kind_no_object_can_have_is_a_located_error(
    run_cli: RunCli, tmp_path: Path, head: str, key: str
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(head + "\nmetadata: {name: x}\n")
    result = run_cli("validate", str(path))
    assert result.code == 2, result.out
    assert "Traceback" not in result.err
    assert f"{path}:" in result.err
    assert f"{key}: {key} " in result.err


@pytest.mark.parametrize("output", [".", "out/", "a/..", ".."])
@pytest.mark.parametrize("target", ["kubernetes", "compose"])
def test_an_output_that_names_a_folder_is_a_located_error(
    run_cli: RunCli, tmp_path: Path, output: str, target: str
) -> None:
    """#42: ``render --target kubernetes`` with ``output: "."`` was a ValueError."""
    text = (EXAMPLES / "small-model" / "tier.yaml").read_text()
    spec = tmp_path / "tier.yaml"
    spec.write_text(text.replace("output: compose.yaml", f"output: {output!r}"))
    for extra in ((), ("--write",), ("--check",)):
        result = run_cli("render", "--target", target, *extra, str(spec))
        assert result.code == 2, (extra, result.out)
        assert "Traceback" not in result.err
        assert f"{spec}:" in result.err
        assert "names a folder, not a file" in result.err


# --- any agent URL: accepted, or refused located, never a crash or an echoed secret ----------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tierctl.errors import InputError  # noqa: E402
from tierctl.rollout.fleet import load_fleet  # noqa: E402

_PORTS = st.one_of(
    st.integers(-100, 200_000).map(str),
    st.sampled_from(["", " 1", "1 ", "+1", "0x10", "٣", "1_0", "65535", "65536", "0"]),
)
_HOSTS = st.sampled_from(["127.0.0.1", "gpu01", "[::1]", "[::1", "::1]", "", "h h", "xn--d"])


@st.composite
def _agent_urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http://", "https://", "ftp://", "http:/", ""]))
    user = draw(st.sampled_from(["", f"u:{SECRET}@", f"{SECRET}@", f":{SECRET}@"]))
    port = draw(st.one_of(st.just(""), _PORTS.map(lambda p: ":" + p)))
    path = draw(st.sampled_from(["", "/", "/agent", "/a b"]))
    query = draw(st.sampled_from(["", f"?token={SECRET}", f"?a=1&api_key={SECRET}", "#f"]))
    return scheme + user + draw(_HOSTS) + port + path + query


@settings(max_examples=300, deadline=None)
@given(_agent_urls())
def test_any_agent_url_is_read_or_refused_located_without_its_secret(url: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = _fleet(Path(tmp), Path(tmp), url)
        refused: InputError | None = None
        try:
            fleet = load_fleet(path)
        except InputError as exc:
            refused = exc
    if refused is not None:
        assert refused.location is not None
        assert refused.location.path == "hosts.0.agent_url"
        assert not holds_any(refused.format(), [SECRET])
        return
    assert SECRET not in url, url  # a credential in the URL is never accepted
    assert fleet.spec.hosts[0].agent_url == url


def test_tc004_value_checks_show_no_value_carrying_a_credential(
    run_cli: RunCli, tmp_path: Path
) -> None:
    """A flag value of the wrong type that holds a URL password: TC004 says it is rejected
    without printing it (it checked only the value's own shape, ``sk-...``)."""
    url = f"http://u:{SECRET}@h/"
    result = run_cli("validate", str(_manifest(tmp_path, _extra_args(f"--max-num-seqs {url}"))))
    assert result.code == 1
    assert "--max-num-seqs: value rejected (a credential: not shown)" in result.out
    assert not holds_any(result.out + result.err, [SECRET])


# --- runbook shell lines: what a fleet file names never runs when the operator pastes them --

_HOSTILE_FILE = "g;id/c'x$(id).yaml"
_STUBS = (
    'curl(){ printf "ARG<%s>\\n" "$@"; }\ncat(){ printf "CAT<%s>" "$@"; }\n'
    "id(){ echo INJECTED; }\ntierctl(){ :; }\ngit(){ :; }\ndocker(){ :; }\n"
)


@pytest.fixture(scope="module")
def hostile_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet-hostile") / "repo"
    target = root / _HOSTILE_FILE
    target.parent.mkdir(parents=True)
    text = (EXAMPLES / "small-model" / "compose.yaml").read_text()
    target.write_text(text)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "v1")
    _git(root, "tag", "v1")
    at = text.rindex("      - --enable-metrics")
    target.write_text(text[:at] + "      - --log-requests\n" + text[at:])
    _git(root, "commit", "-qam", "v2")
    _git(root, "tag", "v2")
    return root


def test_runbook_curl_lines_quote_what_the_fleet_file_names(
    run_cli: RunCli, hostile_repo: Path, tmp_path: Path
) -> None:
    import re

    host = {"file": _HOSTILE_FILE, "token_file": "t'ok$(id).txt"}
    path = _fleet(tmp_path, hostile_repo, "http://127.0.0.1:1", **host)
    text = path.read_text().replace("gpu01/compose.yaml", _HOSTILE_FILE)
    path.write_text(text)
    out = tmp_path / "runbook.md"
    result = run_cli("runbook", "-o", str(out), "--fleet", str(path))
    assert result.code == 0, result.err
    blocks = [
        b
        for b in re.findall(r"```sh\n(.*?)```", out.read_text(), re.S)
        if re.search(r"^curl ", b, re.M)
    ]
    assert blocks
    for block in blocks:
        ran = subprocess.run(["bash", "-c", _STUBS + block], capture_output=True, text=True)
        assert ran.returncode == 0, ran.stderr
        assert "INJECTED" not in ran.stdout
        assert f'"file": "{_HOSTILE_FILE}"' in ran.stdout
        assert "CAT<t'ok$(id).txt>" in ran.stdout


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        ("http://127.0.0.1:1/$(id)`id`;x", {}),
        ("http://h$(id):1/", {}),
        ("http://127.0.0.1:1", {"token_env": "X$(id)"}),
    ],
    ids=["path", "host", "token_env"],
)
def test_a_shell_character_where_a_runbook_writes_a_name_is_refused(
    run_cli: RunCli, repo: Path, tmp_path: Path, url: str, extra: dict[str, str]
) -> None:
    result = run_cli("fleet", "plan", str(_fleet(tmp_path, repo, url, **extra)))
    assert result.code == 2, result.out
    assert "hosts.0." in result.err
