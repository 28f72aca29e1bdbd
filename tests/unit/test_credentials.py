"""Masking a secret in every encoding an echo can carry, and URL userinfo.

The oracle here is independent of :func:`tierctl.credentials.secret_forms`: it encodes the
secret itself (raw, JSON, URL, base64 inside a larger blob, hex, a cut-off prefix) and, to
check the output, reads it the ways :mod:`tests.secret_search` does (every base64, hex, JSON
and percent run decoded).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.secret_search import holds_fragment
from tierctl.credentials import FRAGMENT_CHARS, mask, mask_credentials, mask_userinfo, url_password

# What the masked output may still hold of a secret: fewer than this many of its characters
# in a row, in any encoding.
FRAGMENT = FRAGMENT_CHARS

ENCODINGS: dict[str, Callable[[bytes, bytes, bytes], str]] = {
    "raw": lambda pre, s, post: (pre + s + post).decode("utf-8", "surrogatepass"),
    "json": lambda pre, s, post: json.dumps((pre + s + post).decode("utf-8", "surrogatepass")),
    "json-utf8": lambda pre, s, post: json.dumps(
        (pre + s + post).decode("utf-8", "surrogatepass"), ensure_ascii=False
    ),
    "url": lambda pre, s, post: quote(pre + s + post, safe=""),
    "url-plus": lambda pre, s, post: quote_plus(pre + s + post),
    "url-lower": lambda pre, s, post: re.sub(
        r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(pre + s + post, safe="")
    ),
    "base64": lambda pre, s, post: base64.b64encode(pre + s + post).decode(),
    "base64-urlsafe": lambda pre, s, post: base64.urlsafe_b64encode(pre + s + post).decode(),
    "hex": lambda pre, s, post: (pre + s + post).hex(),
    "HEX": lambda pre, s, post: (pre + s + post).hex().upper(),
    # An echo cut short: the first part of the secret only.
    "truncated": lambda pre, s, post: pre.decode() + _cut(s.decode()),
}


def _cut(secret: str) -> str:
    """The first two thirds of ``secret`` (at least FRAGMENT + 1 characters)."""
    return secret[: max(len(secret) * 2 // 3, FRAGMENT + 1)]


def _holds_fragment(text: str, secret: str) -> bool:
    # A masked output keeps fewer than FRAGMENT characters of a form in a row (fewer bytes
    # still in base64 or hex): FRAGMENT bytes of the secret in a row, in any reading, leak.
    return holds_fragment(text, secret, FRAGMENT)


# After a control character no secret drawn below holds, so no run of one reaches into it.
END = "\x07 done"
_SECRET_CHARS = st.characters(codec="utf-8", categories=("Lu", "Ll", "Nd", "Po", "Pd", "Sm", "Zs"))
_secrets = st.text(_SECRET_CHARS, min_size=12, max_size=48).filter(
    lambda s: len(set(s)) >= 6  # a real secret, not "aaaaaaaaaaaa"
)


@settings(max_examples=300, deadline=None)
@given(
    secret=_secrets,
    encoding=st.sampled_from(sorted(ENCODINGS)),
    pre=st.binary(max_size=5),
    post=st.binary(max_size=5),
    around=st.sampled_from(["", "echo: ", "env HF_TOKEN="]),
)
def test_a_secret_in_any_encoding_is_masked(
    secret: str, encoding: str, pre: bytes, post: bytes, around: str
) -> None:
    if encoding.startswith(("raw", "json", "truncated")):
        # Text encodings: the neighbours must be text too.
        pre, post = pre.decode("latin-1").encode(), post.decode("latin-1").encode()
    raw = secret.encode()
    # Surroundings that already read as part of the secret ("000000" next to a secret of
    # zeros) would be found whatever the masking did.
    assume(not _holds_fragment(around + ENCODINGS[encoding](pre, b"", post) + END, secret))
    text = around + ENCODINGS[encoding](pre, raw, post) + END
    # The planted secret is really there to be found before masking...
    assert _holds_fragment(text, secret)
    masked = mask(text, [secret])
    # ...and nowhere after, in any reading of the text.
    assert not _holds_fragment(masked, secret), (encoding, masked)
    assert masked.endswith(END)  # the rest of the text is kept


def test_every_encoding_of_a_token_is_masked_and_the_text_around_it_kept() -> None:
    token = "PLANTED-tok-4f1c9a0b7e2d6f3a"
    for name, encode in ENCODINGS.items():
        echoed = encode(b'{"a": "', token.encode(), b'"}')
        text = f"agent said: {echoed} (end)"
        masked = mask(text, [token])
        assert "***" in masked, name
        assert masked.startswith("agent said: "), name
        assert masked.endswith(" (end)"), name
        assert not _holds_fragment(masked, token), (name, masked)


def test_a_short_secret_masks_only_its_raw_forms() -> None:
    # The base64 of "ab" is a few letters found in any word: never masked as such.
    assert mask("YWI= table ab", ["ab"]) == "YWI= t***le ***"


def test_text_without_a_secret_is_unchanged() -> None:
    text = "sha256:" + "0" * 64 + " Authorization: Bearer ${TOKEN} http://host:8000/v1"
    assert mask(text, ["PLANTED-tok-4f1c9a0b7e2d6f3a"]) == text


def test_url_userinfo_is_masked() -> None:
    text = "GET http://alice:s3cr%40t@127.0.0.1:9090/api and https://bob@host/x and ftp://h/p"
    assert mask_userinfo(text) == (
        "GET http://alice:***@127.0.0.1:9090/api and https://***@host/x and ftp://h/p"
    )
    assert url_password("http://alice:s3cr%40t@host/") == "s3cr%40t"
    assert url_password("http://host:80/") is None


@given(user=st.from_regex(r"[a-z0-9._-]{0,8}", fullmatch=True),
       password=st.from_regex(r"[A-Za-z0-9%!$&'()*+,;=._~-]{1,20}", fullmatch=True))  # fmt: skip
def test_no_url_password_survives_masking(user: str, password: str) -> None:
    text = f"readout: http://{user}:{password}@127.0.0.1:9/api/v1/query unreachable"
    masked = mask_userinfo(text)
    assert f":{password}@" not in masked
    assert masked.endswith("@127.0.0.1:9/api/v1/query unreachable")


# embedded_credential screens ASCII values with one substring search before its three
# patterns; the screen must never change an answer. The reference runs the patterns alone.
_PIECES = [
    "://",
    "http",
    "user:",
    "pw@",
    "@",
    "Authorization",
    "AUTHORIZATION",
    "api-key",
    "X-Api-Key",
    "x-auth-token",
    "X-ACCESS-TOKEN",
    "Cookie",
    "cookie=",
    "Bearer ",
    "bearer\t",
    "basic ",
    ": ",
    "=",
    '"',
    "'",
    "${T}",
    "${T:-x}",
    "abcdefgh12345678",
    " ",
    "\u0130",
    "\u017f",
    "K",
]


def _embedded_unscreened(value: str) -> str | None:
    from tierctl import credentials as c

    for pattern, kind in (
        (c._URL_PASSWORD, "a password in a URL"),
        (c._HEADER_CREDENTIAL, "a credential header"),
        (c._BEARER, "a bearer token"),
    ):
        for m in pattern.finditer(value):
            if c._literal_part(m.group("v")):
                return kind
    return None


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | st.text(max_size=4), max_size=10).map("".join))
def test_the_screen_before_the_credential_patterns_changes_no_answer(value: str) -> None:
    from tierctl.credentials import embedded_credential

    assert embedded_credential(value) == _embedded_unscreened(value)


@given(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789-_.", min_size=8),
    st.sampled_from(
        [
            "Authorization: Bearer {}",
            "X-Api-Key={}",
            "bearer {}",
            "http://u:{}@h/x",
            '{{"Authorization": "Basic {}"}}',
        ]
    ),
)
def test_mask_credentials_never_leaves_the_credential(secret: str, form: str) -> None:
    from tierctl.credentials import mask_credentials

    text = f"error: path 'git:v1:{form.format(secret)}' does not exist"
    assert secret not in mask_credentials(text)


def test_an_error_echoing_a_credential_from_a_fleet_file_masks_it(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    """The hostile sweep's input 6002: a fleet host's `file:` holding a header line with a
    bearer token was echoed whole in `plan --fleet`'s error."""
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        f"fleet: f\nrepo: {repo}\nold: v1\nnew: v2\nhosts:\n- name: gpu01\n"
        '  file: "Authorization: Bearer hunter2-s3cr3t-0xC0FFEE"\n'
        "  agent_url: http://127.0.0.1:1\n  labels:\n    role: canary\n"
    )
    result = run_cli("plan", "--fleet", str(fleet))
    assert result.code == 2, result.err
    assert "hunter2" not in result.err + result.out


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("http://ghp_TOKEN123@host/x", "http://***@host/x"),
        ("see https://sk-abc.def@10.0.0.1:8000/v1 now", "see https://***@10.0.0.1:8000/v1 now"),
        ("repo: http:/TOKEN@host", "repo: http:/***@host"),  # a URL taken as a path
        ("http://u:pw@host and http://tok@h2", "http://u:***@host and http://***@h2"),
        # No userinfo: an @ in the path, the query or the fragment is left as it is.
        ("http://host/a@b?x=y@z#w@v", "http://host/a@b?x=y@z#w@v"),
        ("mail me: user@example.com", "mail me: user@example.com"),
    ],
)
def test_a_user_only_userinfo_is_masked_whole(text: str, masked: str) -> None:
    """Issue #38: ``http://TOKEN@host`` (a token as the user, no password) was echoed."""
    from tierctl.credentials import mask_credentials

    assert mask_userinfo(text) == masked
    assert mask_credentials(text) == masked
    assert mask_userinfo(masked) == masked  # masking twice changes nothing


@given(token=st.from_regex(r"[A-Za-z0-9%!$&'()*+,;=._~-]{1,24}", fullmatch=True))
def test_no_user_only_token_survives_masking(token: str) -> None:
    from tierctl.credentials import mask_credentials

    text = f"error: agent http://{token}@127.0.0.1:9/v1 unreachable"
    assert mask_credentials(text) == "error: agent http://***@127.0.0.1:9/v1 unreachable"


def test_a_fleet_name_holding_a_user_only_url_is_refused(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    """`_no_credential` reads the name through mask_credentials: a user-only URL is one."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        'fleet: "http://ghp-tok3n-9f8e7d@host/v1"\nrepo: .\nold: v1\nnew: v2\nhosts:\n'
        "- name: gpu01\n  file: a.yaml\n  agent_url: http://127.0.0.1:1\n"
    )
    result = run_cli("plan", "--fleet", str(fleet))
    assert result.code == 2, result.err
    assert "holds a credential" in result.err
    assert "ghp-tok3n" not in result.err + result.out


def test_an_error_value_with_a_user_only_url_is_masked(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    """A fleet field's value quoted in an error goes through mask_credentials (a `file:`
    holding a user-only URL, the CLI's own error echo masks it too)."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "fleet: f\nrepo: .\nold: v1\nnew: v2\nhosts:\n- name: gpu01\n"
        "  file: a.yaml\n  agent_url: http://127.0.0.1:1\n"
        '  token_env: "http://ghp-tok3n-9f8e7d@host"\n'
    )
    result = run_cli("plan", "--fleet", str(fleet))
    assert result.code == 2, result.err
    assert "ghp-tok3n" not in result.err + result.out
    assert "token_env" in result.err


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # the fix validate itself prints: a reference names where the secret comes from
        ('write "Authorization: Bearer ${TOKEN}", and set TOKEN', True),
        ("Authorization: Bearer $TOKEN", True),
        ("X-Api-Key=${API_KEY:?required}", True),
        # a default is a literal: masked
        ("X-Api-Key=${API_KEY:-sk-defaultsecret}", False),
        # a reference with a literal after it is no reference
        ("Authorization: Bearer ${A}sk-trailingsecret", False),
        ("Authorization: Bearer $abc$realsecret", False),
        ("Authorization: Bearer sk-abcdefgh1234", False),
    ],
)
def test_a_reference_is_not_masked_and_a_literal_beside_one_is(text: str, kept: bool) -> None:
    out = mask_credentials(text)
    assert (out == text) is kept, out
    if not kept:
        assert "secret" not in out
        assert "1234" not in out
