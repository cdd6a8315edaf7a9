"""Secret scrubbing: what never reaches the database (`scrub.policy`).

Captured turns are scrubbed before anything is written (the hook spool
included).  Each finding is replaced by `[REDACTED:<kind>]`; for `key=value`
shapes the key stays so the memory still reads sensibly
(`DB_PASSWORD=[REDACTED:password]`).  The patterns favour recall over
precision: a false positive costs a few characters of a memory, a false
negative leaks a credential into every future prompt.

Pure and dependency-free (only `re`), so the hook path can import it cheaply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

POLICIES = ("redact", "warn", "off")


@dataclass
class ScrubResult:
    text: str
    findings: list[str] = field(default_factory=list)  # kinds found, never the secrets

    @property
    def found(self) -> bool:
        return bool(self.findings)


def _mark(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# Whole-token secrets: the match is replaced entirely.  Order matters: the
# private-key block goes first so its body is not half-matched by others.
_TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private-key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*\Z)", re.S)),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}")),
    ("stripe-key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_-]{16,}")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b")),
    ("slack-token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}")),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{16,}")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{30,}")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{30,}")),
    ("pypi-token", re.compile(r"\bpypi-[A-Za-z0-9_-]{40,}")),
)

# `Authorization: Bearer xyz`, `Bearer xyz`, `Basic xyz`: keep the scheme.
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic|token)(\s+)([A-Za-z0-9._~+/=-]{12,})")

# URL userinfo: scheme://user:password@host
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)([^\s@/]{3,})(@)")

# key = value / key: value / "key": "value" where the key names a secret.
_SECRET_KEY = (r"[A-Za-z0-9_.-]*(?:password|passwd|passphrase|secret|token|api[_-]?key|"
               r"apikey|access[_-]?key|private[_-]?key|client[_-]?secret|credentials?|auth)")
_KEY_VALUE = re.compile(
    r"(?i)(?P<key>[\"']?\b" + _SECRET_KEY + r"[\"']?)"
    r"(?P<sep>\s*(?::=|=>|:|=)\s*)"
    r"(?P<value>\"[^\"\n]{1,512}\"|'[^'\n]{1,512}'|[^\s\"',;&)}\]]{1,512})")

_VALUE_IS_PLACEHOLDER = re.compile(
    r"^[\"']?(?:|\*+|x+|\.\.\.|<[^>]*>?|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\[REDACTED[^\]]*\]?|"
    r"null|none|true|false|changeme|example|redacted)[\"']?$", re.I)


def _kind_for_key(key: str) -> str:
    lowered = key.lower()
    for word in ("password", "passwd", "passphrase", "secret", "token", "private",
                 "credential"):
        if word in lowered:
            return {"passwd": "password", "private": "private-key"}.get(word, word)
    if "key" in lowered:
        return "api-key"
    return "secret"


def find_and_redact(text: str) -> ScrubResult:
    """Replace every secret found in `text`; report the kinds found."""
    findings: list[str] = []

    def token_sub(kind: str) -> object:
        def replace(match: re.Match[str]) -> str:
            findings.append(kind)
            return _mark(kind)
        return replace

    for kind, pattern in _TOKEN_PATTERNS:
        text = pattern.sub(token_sub(kind), text)

    def auth(match: re.Match[str]) -> str:
        value = match.group(3)
        # "token" is an ordinary English word; only redact what looks like a credential.
        if match.group(1).lower() == "token" and not _looks_random(value):
            return match.group(0)
        if value.startswith("[REDACTED"):
            return match.group(0)
        findings.append("bearer-token")
        return f"{match.group(1)}{match.group(2)}{_mark('bearer-token')}"

    text = _AUTH_SCHEME.sub(auth, text)

    def url(match: re.Match[str]) -> str:
        findings.append("url-password")
        return f"{match.group(1)}{_mark('password')}{match.group(3)}"

    text = _URL_CREDENTIALS.sub(url, text)

    def key_value(match: re.Match[str]) -> str:
        value = match.group("value")
        if _VALUE_IS_PLACEHOLDER.match(value):
            return match.group(0)
        kind = _kind_for_key(match.group("key"))
        findings.append(kind)
        quote = value[0] if value[:1] in ("'", '"') else ""
        return f"{match.group('key')}{match.group('sep')}{quote}{_mark(kind)}{quote}"

    text = _KEY_VALUE.sub(key_value, text)
    return ScrubResult(text=text, findings=findings)


def _looks_random(value: str) -> bool:
    """A credential-like string: long, mixing letters and digits."""
    return (len(value) >= 20 and any(c.isdigit() for c in value)
            and any(c.isalpha() for c in value))


def scrub(text: str, policy: str = "redact") -> ScrubResult:
    """Apply `scrub.policy`: `redact` replaces, `warn` only reports, `off` does nothing."""
    if policy == "off":
        return ScrubResult(text=text)
    result = find_and_redact(text)
    if policy == "warn":
        return ScrubResult(text=text, findings=result.findings)
    return result
