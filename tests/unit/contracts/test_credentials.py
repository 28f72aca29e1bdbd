"""Credential heuristics: real credentials are caught, real switches and paths are not
(#12's false positives, each from a real compose file's environment)."""

from __future__ import annotations

import pytest

from tierctl.credentials import literal_secret, looks_secret_name, secret_positions


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TOKENIZERS_PARALLELISM", "false"),  # HF tokenizers' own switch
        ("WEBUI_AUTH", "false"),  # open-webui: run without login
        ("HF_TOKEN_PATH", "/run/secrets/hf_token"),  # where the token file is
        ("HF_HUB_ENABLE_HF_TRANSFER", "1"),
        ("CACHE_KEY", "prefix-v2"),
        ("MAX_TOKENS", "4096"),
        ("HF_TOKEN", "${HF_TOKEN:?set HF_TOKEN}"),
        ("HF_TOKEN", "${HF_TOKEN}"),
        ("HF_TOKEN", "${HF_TOKEN:-}"),
        ("API_KEY_FILE", "/run/secrets/key"),
    ],
)
def test_not_credentials(name: str, value: str) -> None:
    assert not literal_secret(name, value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz"),
        ("OPENAI_API_KEY", "abc123"),
        ("WEBUI_AUTH_TOKEN", "s3cret"),
        ("DB_PASSWORD", "hunter2"),
        ("HF_TOKEN", "${HF_TOKEN:-hf_abcdefghijklmnopqrstuvwxyz}"),  # a literal default
        ("DB_PASSWORD", "${DB_PASSWORD:-hunter2}"),
        ("ANYTHING", "${X:-hf_abcdefghijklmnopqrstuvwxyz}"),
        ("Authorization", "Bearer abcdefghijklmnopqrstuvwxyz"),
        ("password", "hunter2"),
        ("bearer_token", "abcdef"),
    ],
)
def test_credentials(name: str, value: str) -> None:
    assert literal_secret(name, value)


def test_names() -> None:
    assert looks_secret_name("SGLANG_API_KEY")
    assert not looks_secret_name("TOKENIZERS_PARALLELISM")
    assert not looks_secret_name("MONKEY_PATCH")


def test_argv_literal_default_is_a_credential() -> None:
    argv = ["serve", "--api-key", "${KEY:-sk-abcdefghijklmnopqrstuvwx}", "--hf-token", "${HF}"]
    assert secret_positions(argv) == [(2, "${KEY:-sk-abcdefghijklmnopqrstuvwx}")]


def test_compose_literals_in_defaults_labels_and_configs_are_violations() -> None:
    from tierctl.compose import load_compose
    from tierctl.contracts.hygiene import secrets

    text = """
services:
  engine:
    image: x
    environment:
      HF_TOKEN: ${HF_TOKEN:-hf_abcdefghijklmnopqrstuvwxyz}
      TOKENIZERS_PARALLELISM: "false"
      WEBUI_AUTH: "false"
      HF_TOKEN_PATH: /run/secrets/hf
    labels:
      com.example.api-token: abcdef123456
      tierctl.role: engine
configs:
  otel:
    content: |
      exporters:
        otlphttp:
          headers:
            Authorization: Bearer abcdefghijklmnopqrstuvwxyz
      extensions:
        basicauth:
          client_auth: {username: u, password: hunter2}
"""
    found = [v.message for v in secrets(load_compose(text))]
    assert any("environment HF_TOKEN" in m for m in found), found
    assert any("label com.example.api-token" in m for m in found), found
    assert any("sets Authorization" in m for m in found), found
    assert any("sets password" in m for m in found), found
    assert not any(
        k in m for m in found for k in ("TOKENIZERS_PARALLELISM", "WEBUI_AUTH", "HF_TOKEN_PATH")
    )
    assert not any("hunter2" in m or "abcdef123456" in m for m in found)


def test_spec_accepts_switches_and_paths_but_not_literal_defaults() -> None:
    from pathlib import Path

    from tierctl.errors import SpecErrors
    from tierctl.spec import load_spec_text

    base = (Path(__file__).resolve().parents[3] / "examples/small-model/tier.yaml").read_text()
    ok = base.replace(
        "    enable-metrics: true\n",
        "    enable-metrics: true\n  env:\n    TOKENIZERS_PARALLELISM: 'false'\n"
        "    WEBUI_AUTH: 'false'\n    HF_TOKEN_PATH: /run/secrets/hf\n",
        1,
    )
    assert "TOKENIZERS_PARALLELISM" in ok
    load_spec_text(ok, "tier.yaml")
    bad = ok.replace("WEBUI_AUTH: 'false'", "HF_TOKEN: ${HF_TOKEN:-hf_abcdefghijklmnopqrstuvwxyz}")
    with pytest.raises(SpecErrors, match="HF_TOKEN holds a literal value"):
        load_spec_text(bad, "tier.yaml")


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("Authorization: Bearer q7Yt2mLw9XzR4aPb", "a credential header"),
        ('{"X-Api-Key": "k-123456"}', "a credential header"),
        ("Cookie: session=abc123", "a credential header"),
        ("https://registrar:Hunter2@gw.internal/register", "a password in a URL"),
        ("redis://:pw@127.0.0.1:6379/0", "a password in a URL"),
        ("http://u:${PW:-literal-default}@host/", "a password in a URL"),
        ("token Bearer abcdefgh12345678", "a bearer token"),
    ],
)
def test_a_credential_inside_a_value_is_found_whatever_the_name(value: str, kind: str) -> None:
    from tierctl.credentials import embedded_credential

    assert embedded_credential(value) == kind
    assert literal_secret("EXTRA_HEADERS", value)


@pytest.mark.parametrize(
    "value",
    [
        "Authorization: Bearer ${TOKEN}",
        "Authorization: Bearer ${TOKEN:?set TOKEN}",
        "https://registrar:${GATEWAY_PASSWORD:?set it}@gw.internal/register",
        "https://gateway.example.internal/register",
        "http://[::1]:8080/v1",
        "http://user@host/",  # a user name alone is no credential
        "authorization=false",
        "--max-running-requests 8",
    ],
)
def test_references_and_plain_urls_carry_no_credential(value: str) -> None:
    from tierctl.credentials import embedded_credential

    assert embedded_credential(value) is None
