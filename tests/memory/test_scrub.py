"""Secret scrubbing (scrub.policy): what must never reach the database."""

from __future__ import annotations

import pytest

from dsh_mnemo.memory.scrub import scrub

SECRETS = {
    "openai": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234567890",
    "anthropic": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github": "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github-pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "slack": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "google": "AIzaSyA1234567890abcdefghijklmnopqrstu",
    "stripe": "sk_live_AbCdEfGhIjKlMnOpQrStUvWx",
    "jwt": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
            "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_known_token_shapes_are_redacted(name: str) -> None:
    secret = SECRETS[name]
    result = scrub(f"use {secret} for the deploy", "redact")
    assert secret not in result.text
    assert "[REDACTED:" in result.text
    assert result.text.startswith("use ") and result.text.endswith(" for the deploy")
    assert result.findings


def test_bearer_token_keeps_the_scheme() -> None:
    result = scrub("curl -H 'Authorization: Bearer abcDEF123456ghiJKL7890mnop'", "redact")
    assert "abcDEF123456ghiJKL7890mnop" not in result.text
    assert "Bearer [REDACTED:bearer-token]" in result.text


@pytest.mark.parametrize("text, secret", [
    ("password=hunter2hunter2", "hunter2hunter2"),
    ("DB_PASSWORD=s3cr3t!value", "s3cr3t!value"),
    ("export GITHUB_TOKEN=abc123def456", "abc123def456"),
    ('{"api_key": "k-123-456-789"}', "k-123-456-789"),
    ("token: 9f8e7d6c5b4a", "9f8e7d6c5b4a"),
    ("client_secret := 'Zm9vYmFyYmF6'", "Zm9vYmFyYmF6"),
    ("postgres://admin:pa55word@db.internal:5432/app", "pa55word"),
])
def test_key_value_secrets_keep_their_key(text: str, secret: str) -> None:
    result = scrub(text, "redact")
    assert secret not in result.text
    assert "[REDACTED:" in result.text


def test_private_key_block_is_removed_whole_even_when_unterminated() -> None:
    block = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE\n"
             "-----END OPENSSH PRIVATE KEY-----")
    result = scrub(f"my key:\n{block}\nthanks", "redact")
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE" not in result.text
    assert result.text.endswith("thanks")
    cut = scrub("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7", "redact")
    assert "MIIEowIBAAKCAQEA7" not in cut.text


def test_ordinary_text_is_left_alone() -> None:
    text = ("We deploy with `make release`. The token bucket limits requests; "
            "password reset emails go through SES. Ask the author: Jane.")
    assert scrub(text, "redact").text == text
    assert not scrub(text, "redact").found


def test_placeholders_are_not_findings() -> None:
    text = "set password=${DB_PASSWORD} and api_key=<your key>"
    assert scrub(text, "redact").text == text


def test_warn_reports_but_keeps_and_off_does_nothing() -> None:
    text = f"key {SECRETS['github']}"
    warned = scrub(text, "warn")
    assert warned.text == text and warned.findings == ["github-token"]
    off = scrub(text, "off")
    assert off.text == text and not off.findings


def test_redaction_is_idempotent() -> None:
    once = scrub(f"password=abc12345 {SECRETS['aws']}", "redact").text
    assert scrub(once, "redact").text == once
