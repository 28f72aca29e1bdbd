"""The agent's HTTP routes against the worst requests (issue #38, #42): every route answers a
4xx with its rule (or 502 where compose misbehaves), never a 500.

The agent runs in-process (aiohttp's test server on a free loopback port, closed by the
fixture) over a one-commit repository; ``compose`` is a stand-in script that prints what the
test tells it to.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tierctl.agent.oplog import OperationLog
from tierctl.agent.projects import ProjectStore
from tierctl.agent.server import MAX_BODY_DEPTH, AgentConfig, RunningAgent, make_app

TOKEN = "agent-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PS = {"tag": "v1", "file": "h/compose.yaml"}


def _repo(root: Path) -> Path:
    (root / "h").mkdir(parents=True)
    (root / "h" / "compose.yaml").write_text("services:\n  a:\n    image: busybox\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@x")
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "v1"], ["tag", "v1"]):
        subprocess.run(["git", "-C", str(root), *argv], check=True, env=env, capture_output=True)
    return root


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[tuple[TestClient, Path]]:
    said = tmp_path / "compose-says.txt"
    said.write_text('{"Service": "a", "Name": "p-a-1", "State": "running"}\n')
    fake = tmp_path / "compose"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(said)!r}).read())\n"
    )
    fake.chmod(0o755)
    config = AgentConfig(
        projects_dir=_repo(tmp_path / "repo"),
        state_dir=tmp_path / "state",
        token=TOKEN,
        compose=(str(fake),),
        body_timeout_s=5.0,
        max_body_bytes=64 * 1024,
    )
    state = RunningAgent(
        config, ProjectStore(config.projects_dir, config.state_dir), OperationLog(tmp_path / "l")
    )
    server = TestServer(make_app(state), host="127.0.0.1")
    client = TestClient(server)
    await client.start_server()
    try:
        yield client, said
    finally:
        await client.close()


async def _raw(client: TestClient, request: bytes) -> bytes:
    """Send ``request`` as bytes on its own connection; the answer's status line."""
    assert client.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()


@pytest.mark.parametrize("route", ["/compose/ps", "/compose/up", "/files?tag=v1&file=h/x"])
async def test_a_token_that_is_not_utf8_is_401(agent: tuple[TestClient, Path], route: str) -> None:
    client, _ = agent
    method = b"GET" if route.startswith("/files") else b"POST"
    request = (
        method + b" " + route.encode() + b" HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: Bearer \xff\xfe\xc3(\r\nContent-Length: 2\r\n\r\n{}"
    )
    assert (await _raw(client, request)).startswith(b"HTTP/1.1 401")


@pytest.mark.parametrize("route", ["/compose/up", "/compose/down", "/compose/ps", "/compose/logs"])
@pytest.mark.parametrize(
    "body",
    [
        b"[" * 20_000 + b"]" * 20_000,  # nests past any recursion limit: was a 500
        json.dumps({"tag": "v1", "x": [[[[[[[[[[1]]]]]]]]]]}).encode(),
        b'{"tag": 1' + b"0" * 5000 + b"}",  # a 5,000-digit number
        b"\xff\xfe not utf-8",
        b"not json",
    ],
    ids=["deep", "deeper than the bound", "long number", "not utf-8", "not json"],
)
async def test_a_body_past_the_bounds_is_400_with_its_rule(
    agent: tuple[TestClient, Path], route: str, body: bytes
) -> None:
    client, _ = agent
    resp = await client.post(route, data=body, headers=AUTH)
    assert resp.status == 400, await resp.text()
    answer = await resp.json()
    assert answer["error"].startswith("the body is not JSON")
    assert answer.get("rule")


async def test_the_depth_bound_leaves_every_real_body(agent: tuple[TestClient, Path]) -> None:
    client, _ = agent
    nested: object = 1
    for _ in range(MAX_BODY_DEPTH - 1):
        nested = [nested]
    resp = await client.post("/compose/ps", json={**PS, "x": nested}, headers=AUTH)
    assert resp.status == 400  # an unknown key, but read
    assert "not JSON" not in (await resp.json())["error"]


async def test_a_body_over_the_size_bound_is_413(agent: tuple[TestClient, Path]) -> None:
    client, _ = agent
    resp = await client.post("/compose/ps", data=b" " * (65 * 1024), headers=AUTH)
    assert resp.status == 413


@pytest.mark.parametrize(
    "printed",
    ["not json at all\n", '{"Service": "a"}\n{"Service": \n', "[" * 5000 + "\n", "[1, 2\n"],
    ids=["text", "a torn line", "deep", "a torn array"],
)
async def test_compose_ps_printing_no_json_is_502(
    agent: tuple[TestClient, Path], printed: str
) -> None:
    client, said = agent
    said.write_text(printed)
    resp = await client.post("/compose/ps", json=PS, headers=AUTH)
    assert resp.status == 502, await resp.text()
    assert "compose ps printed what is not JSON" in (await resp.json())["error"]


async def test_compose_ps_printing_json_lines_is_read(agent: tuple[TestClient, Path]) -> None:
    client, _ = agent
    resp = await client.post("/compose/ps", json=PS, headers=AUTH)
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["containers"][0]["service"] == "a"


@pytest.mark.parametrize(
    "query",
    [
        "tag=" + "v" * 4_000 + "&file=h/compose.yaml",
        "tag=--upload-pack=x&file=h/compose.yaml",
        "tag=v1&file=h/%00x",
        "tag=v1&file=../../etc/passwd",
        "tag=v1&file=" + "a/" * 2_000 + "x",
        "tag=v1",
        "",
    ],
    ids=["long tag", "option as tag", "NUL in file", "file out", "deep file", "no file", "none"],
)
async def test_files_refuses_the_worst_queries_with_a_4xx(
    agent: tuple[TestClient, Path], query: str
) -> None:
    client, _ = agent
    resp = await client.get(f"/files?{query}", headers=AUTH)
    assert 400 <= resp.status < 500, await resp.text()


async def test_logs_refuses_a_tail_past_its_bound(agent: tuple[TestClient, Path]) -> None:
    client, _ = agent
    for tail in (10**12, -1, 0, "5", True):
        body = {**PS, "service": "a", "tail": tail}
        resp = await client.post("/compose/logs", json=body, headers=AUTH)
        assert resp.status == 400, (tail, await resp.text())


async def test_health_answers_whatever_it_is_sent(agent: tuple[TestClient, Path]) -> None:
    client, _ = agent
    request = (
        b"GET /health?" + b"q=1&" * 1_000 + b" HTTP/1.1\r\nHost: x\r\nAuthorization: \xff\r\n\r\n"
    )
    assert (await _raw(client, request)).startswith(b"HTTP/1.1 200")


async def test_calls_past_the_call_bound_are_429_and_health_still_answers(
    agent: tuple[TestClient, Path],
) -> None:
    """max_calls connections hold a call each (a body that never comes); one more call is
    429 with the rule at once, /health is still 200, and each held call is 408 in the end."""
    client, _ = agent
    assert client.port is not None
    limit = AgentConfig(Path(), Path(), "t", ()).max_calls
    head = (
        b"POST /compose/ps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
        + b"\r\nContent-Length: 100\r\n\r\n{"
    )  # fmt: skip
    held = [await asyncio.open_connection("127.0.0.1", client.port) for _ in range(limit)]
    try:
        for _, writer in held:
            writer.write(head)
            await writer.drain()
        await asyncio.sleep(0.5)  # each handler is waiting on its body now
        resp = await client.post("/compose/ps", json=PS, headers=AUTH)
        assert resp.status == 429, await resp.text()
        assert f"at most {limit} calls at once" in (await resp.json())["rule"]
        assert (await client.get("/health")).status == 200
        for reader, _ in held:  # the body deadline (5 s here) ends each held call
            assert (await asyncio.wait_for(reader.readline(), 30)).startswith(b"HTTP/1.1 408")
    finally:
        for _, writer in held:
            writer.close()
    resp = await client.post("/compose/ps", json=PS, headers=AUTH)
    assert resp.status == 200, await resp.text()  # the freed calls are no longer counted


@pytest.mark.parametrize(
    "printed",
    [
        "x" * 300_000 + "\n",  # one line past asyncio's 64 KiB readline (was an exception)
        "y" * 200_000,  # no end of line at all
    ],
    ids=["a 300 KB line", "no newline"],
)
async def test_logs_and_ps_cut_long_lines_and_keep_the_stream(
    agent: tuple[TestClient, Path], printed: str
) -> None:
    client, said = agent
    said.write_text(printed)
    resp = await client.post("/compose/logs", json={**PS, "service": "a", "tail": 10}, headers=AUTH)
    assert resp.status == 200
    events = [json.loads(line) for line in (await resp.text()).splitlines()]
    assert events[-1] == {"type": "exit", "code": 0}


async def test_an_up_stream_cuts_a_long_line_and_ends_with_its_exit(
    agent: tuple[TestClient, Path],
) -> None:
    from tierctl.agent.server import MAX_LINE_CHARS

    client, said = agent
    said.write_text("z" * 300_000 + "\nshort\n")
    body = {**PS, "services": ["a"], "env": {}, "force_recreate": False, "dry_run": False}
    resp = await client.post("/compose/up", json=body, headers=AUTH)
    assert resp.status == 200
    events = [json.loads(line) for line in (await resp.text()).splitlines()]
    lines = [e["line"] for e in events if e["type"] == "stdout"]
    assert all(len(line) <= MAX_LINE_CHARS + 40 for line in lines), [len(x) for x in lines]
    assert "cut at" in lines[0]
    assert lines[-1] == "short"
    assert events[-1] == {"type": "exit", "code": 0}
