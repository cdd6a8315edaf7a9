"""Text safety before storage: secrets (`scrub.policy`) and invisible characters.

Two things never reach the database: credentials, and characters a reader
cannot see.  Every write path (hook capture and its spool, `mnemo remember`,
import, MCP) runs `scrub` on the text it stores; under `redact` it cleans the
text with `clean_invisible` first, under `warn` and `off` the caller runs
`clean_invisible` itself.

Redaction marker
----------------
Each secret becomes `<redacted-KIND>` (`KIND` is a lowercase, hyphenated name
such as `password`, `openai-key`, `private-key`).  For `key=value` shapes the
key, the separator and any quotes stay, so the memory still reads sensibly
(`DB_PASSWORD=<redacted-password>`, `"token": "<redacted-token>"`).  URL
credentials lose the password and keep the host: `amqp://app:<redacted-password>@mq`;
for the four schemes Mnemosyne's own filter knows (`postgres`, `mysql`,
`mongodb`, `redis`) the user name goes too: `redis://:<redacted-password>@cache:6379`.

The marker is chosen so that Mnemosyne's strict write filter
(`mnemosyne.core.filters`, `write_filter: strict`) never takes a scrubbed
text for a secret and rejects the whole turn:

- it starts with `<`, which its generic `password=…` rule excludes from a
  value, so `password=<redacted-password>` has no 8-character value;
- it contains no `:`, so it cannot be the colon its URL rule
  (`postgres://…:…@`) needs, and a redacted URL of those schemes starts its
  user-info with `:`, which that rule cannot match;
- none of its kinds contains a key prefix (`sk-`, `ghp_`, `xox…`).

After mnemo's own patterns, a safety net runs Mnemosyne's own secret patterns
(`SECRET_LABELED_PATTERNS`, through linear-time equivalents) and redacts any
span they still match, so whatever upstream would call a secret is removed
and upstream's filter never rejects a text this module returned.  Its
env-style rule (`SECRET_KEY=` at the very start of the text, whatever the
value) is met by rewriting that one separator to `: ` (`SECRET_KEY: …`).
One shape is left alone: a URL of those four schemes *without* credentials
followed, anywhere later, by a `:` and an `@` (`postgres://db:5432/app …
ping @ops`) also matches upstream's URL rule; rewriting it would damage
ordinary text, so upstream may still reject such a text.

Full-width forms (U+FF01-FF5E, the ideographic space), as a Chinese, Japanese
or Korean input method types them (`password：hunter2`, `ＡＰＩ＿ＫＥＹ＝…`), are
read as ASCII: a text that has any is scrubbed in that reading, and keeps its
own characters everywhere but in the stretch of a line from its first
redaction to its last.  The full-width punctuation that ends the value of
`密码都是 admin，记得改` (都是/还是/也是 name a password only when it ends the
clause) reads as a mark that ends the clause, not as a space.

The patterns favour recall over precision: a false positive costs a few
characters of a memory, a false negative leaks a credential into every
future prompt.

Linear time
-----------
Hooks run under a deadline, and a regular expression that backtracks holds
the GIL so the timer cannot stop the process.  Every pattern here is linear
in the length of the text:

- every quantifier is bounded, or is the last element of its pattern;
- a repeat followed by something that can fail uses a class that excludes
  that something, and its start is pinned to the start of a run (a
  look-behind right after the literal prefix), so each run of characters is
  scanned by a constant number of attempts;
- no nested unbounded repeats, no overlapping alternatives under a repeat;
- private-key blocks are found by scanning BEGIN and END markers in order,
  never with `.*?` across the text;
- upstream's own rules that backtrack quadratically (its JWT and URL rules)
  are re-implemented with the same meaning in linear time.

Speed matters as much as the shape of the patterns: case-insensitive
patterns run case-sensitively over a lowered copy of the text of the same
length (`_lower`, positions carry over), since Python's regex engine scans
for a literal prefix quickly only without IGNORECASE; `_lower` also folds
the three characters IGNORECASE matches with ASCII letters (İ ı ſ; the
Kelvin sign lowers to `k` by itself), so upstream's rules keep their
meaning.  Passes whose keyword is absent are skipped, fixed replacements
run as C-level substitutions, and a per-match decision (placeholder, stop
word, random-looking value) is a few string operations.  1 MiB of any shape
in `tests/corpus/hostile.py` costs at most about six times as much CPU as
1 MiB of ordinary text (0.94 s against 0.17 s on a 2-core x86-64 machine;
`tests/cputime.py` holds every shape to eight times).

Invisible characters
--------------------
`clean_invisible` (and `hook.inject.sanitize` with the same set, on the way
out) removes every character that renders as nothing and could carry hidden
text: all Unicode format characters (category Cf: zero-width spaces and
joiners, bidi controls, the BOM, soft hyphen, the tag characters
U+E0000–E007F, interlinear annotations U+FFF9–FFFB, Egyptian hieroglyph
format controls U+13430–1343F, shorthand format controls U+1BCA0–1BCA3,
musical beam and slur controls U+1D173–1D17A), variation selectors
(U+FE00–FE0F, U+E0100–E01EF, and the rest of plane 14), the Mongolian free
variation selectors, the combining grapheme joiner, the Khmer inherent
vowels, the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0) and the
unassigned specials U+FFF0–FFF8.  The list is written out rather than read
from `unicodedata`, so an older Python whose Unicode tables lack a newer
format character still removes it.  The braille blank U+2800 looks like a
space and is one in braille, so it becomes a space.  C0/C1 control
characters other than tab and newline are removed; CR, CRLF, U+2028 and
U+2029 become newlines.  Lone surrogates (half an emoji, cut by a harness)
become U+FFFD; a proper surrogate pair becomes the character it encodes.
The cost: ZWJ emoji sequences fall apart into their parts, emoji lose their
presentation selector, and scripts that use ZWJ/ZWNJ (Persian, Indic) lose
a ligature hint; the words themselves survive.

Pure and stdlib-only (plus upstream's filters module, imported lazily: it is
cheap and opens no database), so the hook path can import it cheaply.
"""

from __future__ import annotations

import binascii
import os
import re
import sys
from collections.abc import Callable, Iterator

from ..lazy_re import lazy
from ..record import field, record

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

POLICIES = ("redact", "warn", "off")


@record
class ScrubResult:
    text: str
    findings: list[str] = field(default_factory=list)  # kinds found, never the secrets

    @property
    def found(self) -> bool:
        return bool(self.findings)


MARKER_PREFIX = "<redacted-"


def marker(kind: str) -> str:
    """The text that replaces a secret of `kind`: `<redacted-KIND>`."""
    return f"{MARKER_PREFIX}{kind}>"


# ─── Invisible characters and broken text ──────────────────────────────────

# Inclusive ranges of characters that render as nothing (see the module
# docstring).  tests/memory/test_scrub.py checks that every Cf character of the
# running Python's Unicode tables is covered.
INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),    # soft hyphen
    (0x034F, 0x034F),    # combining grapheme joiner
    (0x0600, 0x0605),    # Arabic number signs (Cf)
    (0x061C, 0x061C),    # Arabic letter mark
    (0x06DD, 0x06DD),    # Arabic end of ayah (Cf)
    (0x070F, 0x070F),    # Syriac abbreviation mark
    (0x0890, 0x0891),    # Arabic pound/piastre mark above (Cf)
    (0x08E2, 0x08E2),    # Arabic disputed end of ayah (Cf)
    (0x115F, 0x1160),    # Hangul choseong/jungseong fillers
    (0x17B4, 0x17B5),    # Khmer inherent vowels
    (0x180B, 0x180F),    # Mongolian free variation selectors, vowel separator
    (0x200B, 0x200F),    # zero-width space, ZWNJ, ZWJ, LRM, RLM
    (0x202A, 0x202E),    # bidi embeddings and overrides
    (0x2060, 0x206F),    # word joiner, invisible operators, bidi isolates, deprecated
    (0x3164, 0x3164),    # Hangul filler
    (0xFE00, 0xFE0F),    # variation selectors
    (0xFEFF, 0xFEFF),    # BOM / zero-width no-break space
    (0xFFA0, 0xFFA0),    # halfwidth Hangul filler
    (0xFFF0, 0xFFFB),    # unassigned specials, interlinear annotation controls
    (0x110BD, 0x110BD),  # Kaithi number sign
    (0x110CD, 0x110CD),  # Kaithi number sign above
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol beam/tie/slur/phrase controls
    (0xE0000, 0xE0FFF),  # tag characters, variation selectors supplement, rest of plane 14
)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    parts = []
    for low, high in ranges:
        parts.append(re.escape(chr(low)) if low == high
                     else f"{re.escape(chr(low))}-{re.escape(chr(high))}")
    return "".join(parts)


INVISIBLE_CLASS = _char_class(INVISIBLE_RANGES)
_INVISIBLE = lazy(f"[{INVISIBLE_CLASS}]")
# C0 and C1 controls except tab and newline (CR is turned into a newline first).
_INVISIBLE_OR_CONTROL = lazy(f"[{INVISIBLE_CLASS}\x00-\x08\x0b-\x1f\x7f-\x9f]")
# What of it an ASCII text can hold (every invisible character is past ASCII):
# most prompts never compile the wide class above.
_ASCII_CONTROL = lazy("[\x00-\x08\x0b-\x1f\x7f]")
_LINE_BREAKS = lazy("\r\n?|[\u2028\u2029]")
_SURROGATE = lazy("[\ud800-\udfff]")
_LONE_SURROGATE = lazy(
    "[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


def fix_surrogates(text: str) -> str:
    """Lone surrogates become U+FFFD; a surrogate pair becomes its character.

    A harness that cuts text in the middle of an emoji sends half of it as a
    JSON `\\ud83d` escape: such a string cannot be encoded as UTF-8, so it
    could not be written to the spool or the database.
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    text = _LONE_SURROGATE.sub("\ufffd", text)
    if _SURROGATE.search(text) is None:
        return text
    # Only proper pairs are left: let the codec join them.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_invisible(text: str) -> str:
    """`text` safe to store: no invisible characters, controls or lone surrogates.

    Keeps tab and newline; CR, CRLF, U+2028 and U+2029 become newlines, the
    braille blank U+2800 a space.  Linear time.
    """
    text = fix_surrogates(text)
    text = _LINE_BREAKS.sub("\n", text)
    if text.isascii():
        return _ASCII_CONTROL.sub("", text)
    text = _INVISIBLE_OR_CONTROL.sub("", text)
    return text.replace("\u2800", " ")


def strip_invisible(text: str) -> str:
    """Only the invisible characters of `clean_invisible` removed (controls kept)."""
    return text if text.isascii() else _INVISIBLE.sub("", text)


# ─── Matching helpers ──────────────────────────────────────────────────────

# In a text read in ASCII (`_ascii_reading`), the full-width and ideographic
# punctuation that ends a clause ("密码都是 admin，…", "password=hunter2、…"): a space
# to the patterns' `\s`, the end of a clause to `_ends_clause` and `_CLAUSE_END`, the
# end of a config line's value, and a word break to `_command_word`.  A control
# character, so never in a cleaned text; it is written back as the text's own
# character (`_write_back`).
_CLAUSE_MARK = "\x1f"

# Under re.IGNORECASE these match ASCII letters; `_lower` folds them so that
# case-sensitive patterns over the lowered text mean the same.  U+0130 is
# also the one character whose str.lower() is two characters long.
_FOLD = {0x130: "i", 0x131: "i", 0x17F: "s"}
_FOLD_CHARS = lazy("[\u0130\u0131\u017f]")


def _lower(text: str) -> str:
    """`text` lowercased, with the same length, so positions carry over.

    Case-insensitive patterns run as lowercase patterns over this text: the
    regex engine scans a literal prefix fast only without IGNORECASE.
    """
    if not text.isascii() and _FOLD_CHARS.search(text):
        text = text.translate(_FOLD)
    return text.lower()


# A callback's answer: (start, end, replacement, kind) within the match, or None.
Replace = Callable[[re.Match[str], str], "tuple[int, int, str, str] | None"]


def _sub(pattern: re.Pattern[str], text: str, findings: list[str], replace: Replace,
         lowered: str | None = None) -> str:
    """Match `pattern` over `_lower(text)` (`lowered`, when the caller has it);
    `replace(match, text)` says what to cut from `text`."""
    pieces: list[str] = []
    pos = 0
    for match in pattern.finditer(_lower(text) if lowered is None else lowered):
        if match.start() < pos:
            continue  # inside what the last replacement took (a passphrase runs past its match)
        result = replace(match, text)
        if result is None:
            continue
        start, end, replacement, kind = result
        pieces.append(text[pos:start])
        pieces.append(replacement)
        findings.append(kind)
        pos = end
    if not pieces:
        return text
    pieces.append(text[pos:])
    return "".join(pieces)


def _sub_commands(pattern: re.Pattern[str], text: str, findings: list[str],
                  replace: Replace) -> str:
    """`_sub` for a command and its flag (groups `cmd`, `value`): when `replace` turns a
    match down, the search goes on right after its command word, so a later command
    of the line (`docker exec -it mongo mongosh -p …`) gets its own match.  Each
    command word is tried once, and a match spans a bounded number of words."""
    lowered = _lower(text)
    pieces: list[str] = []
    pos = done = 0
    while True:
        match = pattern.search(lowered, pos)
        if match is None:
            break
        result = replace(match, text)
        if result is None:
            pos = match.end("cmd")
            continue
        start, end, replacement, kind = result
        pieces.append(text[done:start])
        pieces.append(replacement)
        findings.append(kind)
        pos = done = end
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def _sub_fixed(pattern: re.Pattern[str], text: str, findings: list[str], template: str,
               kind: str) -> str:
    """`pattern.subn(template, text)` (no Python per match); one finding per match."""
    text, count = pattern.subn(template, text)
    findings.extend([kind] * count)
    return text


def _replace_span(pattern: re.Pattern[str], text: str, findings: list[str], first: str,
                  last: str, replacement: str, kind: str, lowered: bool = False) -> str:
    """Replace, in every match, the text from group `first` to group `last`.

    With `lowered`, `pattern` (lowercase) is matched over `_lower(text)`.
    """
    pieces: list[str] = []
    pos = 0
    for match in pattern.finditer(_lower(text) if lowered else text):
        pieces.append(text[pos:match.start(first)])
        pieces.append(replacement)
        pos = match.end(last)
    if not pieces:
        return text
    findings.extend([kind] * (len(pieces) // 2))
    pieces.append(text[pos:])
    return "".join(pieces)


@record(frozen=True)
class _Span:
    start: int
    end: int
    replacement: str
    kind: str


def _apply(text: str, spans: list[_Span], findings: list[str]) -> str:
    """Replace `spans` (sorted by start; a span overlapping an earlier one is dropped)."""
    if not spans:
        return text
    spans.sort(key=lambda s: s.start)
    out: list[str] = []
    pos = 0
    for span in spans:
        if span.start < pos:
            continue
        out.append(text[pos:span.start])
        out.append(span.replacement)
        if span.kind:
            findings.append(span.kind)
        pos = span.end
    out.append(text[pos:])
    return "".join(out)


_KEY_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
_DIGITS = frozenset("0123456789")
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_HEX = lazy(r"[0-9a-fA-F]{8,4096}")
_B64ISH = lazy(r"[A-Za-z0-9+/_~.=-]{20,4096}")


def _looks_random(value: str) -> bool:
    """A credential-like string: letters with digits and some variety, or long hex/base64."""
    if len(value) < 8:
        return False
    if value.isalpha():  # no digit, no symbol: only a long hex run can be random
        return len(value) >= 32 and _HEX.fullmatch(value) is not None
    chars = set(value)
    has_digit = bool(chars & _DIGITS)
    has_upper = bool(chars & _UPPER)
    has_lower = bool(chars & _LOWER)
    if _HEX.fullmatch(value):
        return (has_digit and (has_upper or has_lower)) or len(value) >= 32
    if has_digit and (has_upper or has_lower or any(c.isalpha() for c in value)):
        return (has_upper and has_lower) or len(value) >= 12 or not value.isalnum()
    if _B64ISH.fullmatch(value):
        return has_upper and has_lower and bool(chars & set("+/=_-"))
    return False


_PLACEHOLDER = lazy(
    r"(?:|\*{1,64}|x{1,64}|\.{2,64}|…|-|<[^<>\n]{0,64}>|\$\{[^{}\n]{0,64}\}|"
    r"\$[a-z_][a-z0-9_]{0,64}|\{\{[^{}\n]{0,64}\}\}|%\([a-z_]{1,32}\)s|"
    r"null|none|nil|true|false|undefined|changeme|example|redacted|"
    r"\[redacted[^\]\n]{0,32}\]|your[ _-][\w -]{0,40}|"
    r"(?:os\.environ|os\.getenv|getenv|process\.env|env|settings|config)[.\[(].{0,64})")
_PLACEHOLDER_START = frozenset("*x.…-<${%[ntfeucyrgpos")
# An all-caps word that names what goes there (`-p PASSWORD`, `YOUR_API_TOKEN`,
# `DB_PASS`), matched as written: `Password1` or `hunter2` is no placeholder.
_CAPS_PLACEHOLDER = lazy(
    r"(?:[A-Z]{1,16}_){0,3}(?:PASSWORD|PASSWD|PASSPHRASE|PASSCODE|PASS|PWD|PW|SECRET|TOKEN|"
    r"KEY|APIKEY|CREDENTIALS?|CREDS)(?:_HERE)?")
# What a Chinese form says in a password's field: optional, required, none, see below.
_FORM_WORDS = frozenset("""
可选 必填 必填项 必选 选填 非必填 非必须 必须 无 空 略 见下文 见上文 见下 见上 不填 留空 待定 暂无
任意 默认 随机 自动生成 同上 同下 见说明 见备注 已隐藏 隐藏 保密 可空 不可为空 不能为空
""".split())  # noqa: SIM905 - a word list reads better as text
_FORM_END = "。.，,；;、"


def _is_placeholder(value: str) -> bool:
    """`${VAR}`, `<your key>`, `***`, `null`, `os.environ[...]`, `$(cat pw)`,
    `PASSWORD`, `可选`: not a secret."""
    stripped = value.strip().strip("\"'`")
    if not stripped:
        return True
    first = stripped[0]
    if first.lower() not in _PLACEHOLDER_START:  # most values: a test or two
        if first in _UPPER:
            return len(stripped) <= 64 and _CAPS_PLACEHOLDER.fullmatch(stripped) is not None
        return first > "\x7f" and stripped.rstrip(_FORM_END) in _FORM_WORDS
    if first == "$" and stripped.startswith("$("):  # a command substitution: a reference
        return True
    if first in _UPPER and len(stripped) <= 64 and _CAPS_PLACEHOLDER.fullmatch(stripped):
        return True
    return bool(_PLACEHOLDER.fullmatch(_lower(stripped))) or stripped.startswith(MARKER_PREFIX)


# Words that follow "password:" or "password is" in ordinary prose.
_STOPWORDS = frozenset("""
a an the is are was were be been being to for in on of and or not no yes it this that
these those here there below above required optional mandatory hashed salted stored
saved encrypted reset set changed rotated expired invalid incorrect wrong
empty missing blank unknown known weak strong long short too same different new old
click enter see use type please must should can will never always now still just
only also field fields value values policy policies manager managers protected
hidden masked shown visible secure insecure managed handled generated random
unique case sensitive length characters digits letters etc ok fine good bad
your my our their his her its one ones bucket buckets based auth authentication with from
""".split())  # noqa: SIM905 - a word list reads better as text
# Verbs and participles that follow "password is" in prose ("is cached by gpg-agent",
# "is kept in the vault", "is set every 90 days", "is to be rotated"), besides any
# lowercase word ending in -ed.
_PARTICIPLES = frozenset("""
kept held shown written sent given taken known read hidden stolen broken forgotten lost
built made done put left found got gotten spent shared set reset be been being to use
type click enter see must should can will
""".split())  # noqa: SIM905 - a word list reads better as text


def _prose_verb(word: str) -> bool:
    """`word`, as written, is a verb or participle of prose (`rotated`, `cached`, `kept`)."""
    low = word.lower()
    if low in _PARTICIPLES:
        return True
    return (word.islower() and word.isalpha() and len(word) > 3 and low.endswith("ed")
            and not low.endswith("eed"))


# ─── Private-key blocks ────────────────────────────────────────────────────

_PEM_LABEL = r"[ ]{1,4}(?:[a-z0-9]{1,12}[ ]{1,4}){0,4}private[ ]{1,4}key(?:[ ]{1,4}block)?-----"
_PEM_BEGIN = lazy(r"-----begin" + _PEM_LABEL)
_PEM_END = lazy(r"-----end" + _PEM_LABEL)
_PUTTY_BEGIN = lazy(r"putty-user-key-file-[0-9]{1,2}:")
_PUTTY_END = lazy(r"private-mac:[ \t]{0,8}[0-9a-f]{1,256}")


def _blocks(lowered: str, begin: re.Pattern[str],
            end: re.Pattern[str]) -> Iterator[tuple[int, int]]:
    """(start, end) of each block, in order; an unterminated one runs to the end.

    Linear: after a BEGIN, the END search starts there, and the next BEGIN
    search starts after that END, so no character is scanned twice.
    """
    pos = 0
    while True:
        opened = begin.search(lowered, pos)
        if opened is None:
            return
        closed = end.search(lowered, opened.end())
        if closed is None:
            yield opened.start(), len(lowered)
            return
        yield opened.start(), closed.end()
        pos = closed.end()


def _redact_blocks(text: str, findings: list[str]) -> str:
    lowered = _lower(text)
    if "-----" in text or "putty-user-key-file-" in lowered:
        spans = []
        for begin, end in ((_PEM_BEGIN, _PEM_END), (_PUTTY_BEGIN, _PUTTY_END)):
            spans.extend(_Span(s, e, marker("private-key"), "private-key")
                         for s, e in _blocks(lowered, begin, end))
        text = _apply(text, spans, findings)
    if _OPENSSH_BODY in text or ("private" in lowered and ("MII" in text or "MH" in text)):
        text = _redact_bare_keys(text, findings)
    return text


# A key's body pasted without its BEGIN and END lines.  An OpenSSH key's body starts
# with the base64 of `openssh-key-v1` and a NUL, which nothing else does; a PEM RSA,
# EC or PKCS#8 key's DER starts with a SEQUENCE (`MII…`, `MHc…`, `MIG…`), as a
# certificate's or a public key's does, so such a body counts only right under a line
# that names a private key (`private key:`, `id_rsa (private key)`).  The body is its
# first line and every following line of base64 (16 characters or more, or a short
# last one that ends with `=`).
_OPENSSH_BODY = "b3BlbnNzaC1rZXktdjE"
_BARE_KEY_START = lazy(r"(?<![A-Za-z0-9+/])(?:b3BlbnNzaC1rZXktdjE|(?P<der>MII|MHc|MIG))"
                       r"[A-Za-z0-9+/]{13,4096}+={0,2}(?=[ \t]{0,8}(?:\r?\n|\Z))")
_BASE64_LINE = lazy(r"[ \t]{0,8}(?:[A-Za-z0-9+/]{16,4096}+={0,2}|[A-Za-z0-9+/]{1,15}={1,2})"
                    r"[ \t]{0,8}(?=\r?\n|\Z)")
_PRIVATE_KEY_LABEL = lazy(r"private[ _-]?key")


def _redact_bare_keys(text: str, findings: list[str]) -> str:
    spans: list[_Span] = []
    floor = 0
    for start in _BARE_KEY_START.finditer(text):
        if start.start() < floor:
            continue
        if start.group("der") is not None:
            # the label on its line (`private key: MII…`) or on the line above
            line_start = text.rfind("\n", 0, start.start()) + 1
            label = text[line_start:start.start()]
            if not label.strip():
                label = text[max(0, line_start - 160):line_start].rstrip().rsplit("\n", 1)[-1]
            if (_PRIVATE_KEY_LABEL.search(_lower(label)) is None
                    or len(start.group()) < 40):
                continue
        end = start.end()
        while True:
            newline = text.find("\n", end)
            if newline < 0 or text[end:newline].strip():
                break
            line = _BASE64_LINE.match(text, newline + 1)
            if line is None or line.end() == newline + 1:
                break
            end = line.end()
        spans.append(_Span(start.start(), end, marker("private-key"), "private-key"))
        floor = end
    return _apply(text, spans, findings)


# ─── Whole-token secrets ───────────────────────────────────────────────────

def _tok(literal: str, body: str, boundary: str = "A-Za-z0-9") -> str:
    """`literal` not preceded by a `boundary` character, then `body`.

    The look-behind comes after the literal so the regex engine can still
    scan for the literal prefix quickly.
    """
    return f"{literal}(?<![{boundary}]{literal}){body}"


_END = r"(?![A-Za-z0-9_-])"

@record(frozen=True)
class _Token:
    kind: str
    needle: str  # a literal that must be in the text for the pattern to run
    source: str  # the pattern; a `head` group in it is kept
    cut: str | None  # the prefix `_CUT_END` looks for (below); None: not looked for
    cut_digit: bool  # ... and whether what follows it there must hold a digit


def _token(kind: str, needle: str, literal: str, rest: str, body: str, *,
           boundary: str = "A-Za-z0-9", cut: bool = True, digit: bool = False) -> _Token:
    """A token that starts with a prefix: `literal` (see `_tok`), then `rest` (the
    prefix's variable part, if any), then `body`.  The whole prefix is what a
    cut token is recognised by; `digit` for a prefix that could start a word."""
    return _Token(kind, needle, _tok(literal, rest + body, boundary),
                  literal + rest if cut else None, digit)


def _bare(kind: str, needle: str, source: str) -> _Token:
    """A token with no prefix of its own: not looked for at a cut."""
    return _Token(kind, needle, source, None, False)


# Order matters: specific prefixes before the general ones that contain them.
# Each pattern is compiled the first time its literal turns up: most texts
# hold none, and a hook pays for every pattern it compiles at its start.
_TOKEN_PATTERNS: tuple[_Token, ...] = (
    _token("anthropic-key", "sk-ant-", "sk-ant-", "", r"[A-Za-z0-9_-]{20,}"),
    _token("openai-key", "sk-", "sk-", "", r"(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"
                                           r"|[A-Za-z0-9]{20,}[A-Za-z0-9_-]{0,512})", digit=True),
    _token("stripe-key", "k_", "[srp]k_(?:live|test)_", "", r"[A-Za-z0-9]{10,}"),
    _token("stripe-webhook-secret", "whsec_", "whsec_", "", r"[A-Za-z0-9+/=]{20,}"),
    _token("github-token", "gh", "gh[pousr]_", "", r"[A-Za-z0-9]{30,}"),
    _token("github-token", "github_pat_", "github_pat_", "", r"[A-Za-z0-9_]{22,}"),
    _token("gitlab-token", "gl", "gl", "(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent|ffct)-",
           r"[A-Za-z0-9_-]{20,}"),
    _token("aws-access-key", "A", "A",
           "(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA|NVA|IPA|PKA|3T[A-Z0-9])",
           r"[A-Z0-9]{16}(?![A-Za-z0-9])", digit=True),
    _token("slack-token", "xox", "xox[abposre]-", "", r"[A-Za-z0-9-]{10,}"),
    _token("slack-token", "xapp-", "xapp-", "", r"[0-9]{1,3}-[A-Za-z0-9-]{10,}"),
    _bare("slack-webhook", "hooks.slack.com",
          r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{16,}"),
    _token("google-api-key", "AIza", "AIza", "", r"[0-9A-Za-z_-]{30,}", digit=True),
    _token("google-oauth-secret", "GOCSPX-", "GOCSPX-", "", r"[A-Za-z0-9_-]{20,}"),
    _token("google-oauth-token", "ya29.", r"ya29\.", "", r"[0-9A-Za-z_-]{20,}"),
    _token("google-oauth-token", "1//", "1//", "", r"0[0-9A-Za-z_-]{30,}",
           boundary="A-Za-z0-9/", cut=False),
    _bare("azure-key", "Key", r"(?P<head>(?:AccountKey|SharedAccessKey)(?<![A-Za-z0-9]AccountKey)"
                              r"(?<![A-Za-z0-9]SharedAccessKey)[ \t]{0,4}=[ \t]{0,4})"
                              r"[A-Za-z0-9+/]{20,}={0,2}"),
    _bare("azure-sas-signature", "sig=",
          r"(?P<head>sig=)(?<![A-Za-z0-9_]sig=)[A-Za-z0-9%+/]{16,}={0,2}"),
    _token("sendgrid-key", "SG.", r"SG\.", "", r"[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
           digit=True),
    _token("twilio-key", "SK", "SK", "", r"[0-9a-fA-F]{32}(?![A-Za-z0-9])", cut=False),
    _token("digitalocean-token", "_v1_", "do[por]_v1_", "", r"[a-fA-F0-9]{64}"),
    _token("npm-token", "npm_", "npm_", "", r"[A-Za-z0-9]{30,}", digit=True),
    _token("pypi-token", "pypi-", "pypi-", "", r"[A-Za-z0-9_-]{40,}", digit=True),
    _token("huggingface-token", "hf_", "hf_", "", r"[A-Za-z0-9]{30,}", digit=True),
    _token("huggingface-token", "api_org_", "api_org_", "", r"[A-Za-z0-9]{30,}"),
    _token("heroku-key", "HRKU-", "HRKU-", "", r"[A-Za-z0-9_-]{20,}"),
    _token("mailgun-key", "key-", "key-", "", r"[0-9a-zA-Z]{32}(?![A-Za-z0-9])",
           boundary="A-Za-z0-9_-", cut=False),
    _token("sentry-token", "sntry", "sntry[su]_", "", r"[A-Za-z0-9_=+/-]{30,}"),
    _bare("discord-webhook", "discord",
          r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/"
          r"[A-Za-z0-9_-]{20,}"),
    _bare("discord-token", ".",
          r"(?<![A-Za-z0-9_.-])[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\."
          r"[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_-])"),
    # a presigned S3 or GCS URL is a bearer URL: its signature goes
    _bare("url-signature", "Signature=",
          r"(?P<head>[Xx]-(?:[Aa]mz|[Gg]oog)-[Ss]ignature=)[0-9a-fA-F]{32,}"),
    _bare("teams-webhook", "webhook.office.com",
          r"(?P<head>https://[A-Za-z0-9.-]{0,64}webhook\.office\.com/webhookb2/)"
          r"[A-Za-z0-9@/_.-]{20,}"),
    _bare("zapier-webhook", "hooks.zapier.com",
          r"(?P<head>https://hooks\.zapier\.com/hooks/catch/[0-9]{3,20}/)[A-Za-z0-9]{4,}"),
    _bare("telegram-token", ":AA", r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{33}" + _END),
    _token("vault-token", "hv", r"hv[sbr]\.", "", r"[A-Za-z0-9_-]{24,}"),
    _token("databricks-token", "dapi", "dapi", "", r"[0-9a-f]{32}(?:-[0-9])?(?![A-Za-z0-9])",
           cut=False),
    _token("shopify-token", "shp", "shp(?:at|ss|ca|pa)_", "", r"[0-9a-fA-F]{32}"),
    _token("linear-key", "lin_", "lin_", "(?:api|oauth)_", r"[A-Za-z0-9]{32,}"),
    _token("notion-token", "ntn_", "ntn_", "", r"[A-Za-z0-9]{40,}"),
    _token("age-secret-key", "AGE-SECRET-KEY-", "AGE-SECRET-KEY-1", "", r"[0-9A-Z]{50,}"),
)

_COMPILED: dict[str, re.Pattern[str]] = {}


def _compiled(source: str) -> re.Pattern[str]:
    pattern = _COMPILED.get(source)
    if pattern is None:
        pattern = _COMPILED[source] = re.compile(source)
    return pattern


# JWTs over the lowered text, with exactly upstream's meaning (its rule is
# case-insensitive and has no boundary) but linear: the match consumes only
# the first run, the look-ahead checks the two segments after it; the run
# is then searched for the first `eyj` followed by a character.
_JWT_RUN = lazy(r"(?<![a-z0-9_-])[a-z0-9_-]{4,}(?=\.eyj[a-z0-9_-]{1,}\.[a-z0-9_-])")
_JWT_SEGMENT = lazy(r"[a-z0-9_-]{1,}")
_JWT_HEAD = lazy(r"eyj(?=[a-z0-9_-])")


def _jwt_spans(lowered: str) -> list[tuple[int, int]]:
    """(start, end) of every JWT-shaped span, as upstream's rule would find them."""
    spans: list[tuple[int, int]] = []
    floor = 0
    for run in _JWT_RUN.finditer(lowered):
        if run.start() < floor:
            continue
        head = _JWT_HEAD.search(lowered, run.start(), run.end())
        if head is None:
            continue
        second = _JWT_SEGMENT.match(lowered, run.end() + 1)
        third = _JWT_SEGMENT.match(lowered, second.end() + 1) if second else None
        if third is None:
            continue
        spans.append((head.start(), third.end()))
        floor = third.end()
    return spans


# A JWT wrapped at its dots (`eyJ….` at the end of a line, the payload on the next,
# or a space typed after a dot): the header and the payload each start with `eyJ`,
# which no word does, so the three runs are taken whole; at least one dot has a break
# after it (`_jwt_spans` takes the unbroken ones), and a signature after a break is 16
# characters or more (a word on the next line is not one).
_JWT_GAP = r"(?:[ \t]{0,2}\r?\n[ \t]{0,8}|[ \t]{1,2})"
_JWT_WRAPPED = lazy(
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,4096}+\."
    r"(?:" + _JWT_GAP + r"eyJ[A-Za-z0-9_-]{4,4096}+\.(?:" + _JWT_GAP + r")?"
    r"|eyJ[A-Za-z0-9_-]{4,4096}+\." + _JWT_GAP + r"(?=[A-Za-z0-9_-]{16}))"
    r"[A-Za-z0-9_-]{16,4096}+")


# A bare 40-character AWS secret access key (in prose: "the secret is wJal…").
_AWS_SECRET_LOWERED = lazy(r"(?<![a-z0-9/+=])[a-z0-9/+]{40}(?![a-z0-9/+=])")


def _aws_secret(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    start, end = match.span()
    value = text[start:end]
    if value[0] == "/" or value.count("/") + value.count("+") > 4:
        return None
    chars = set(value)
    if not (chars & _UPPER and chars & _LOWER and chars & _DIGITS):
        return None
    return start, end, marker("aws-secret-key"), "aws-secret-key"


def _redact_tokens(text: str, findings: list[str]) -> str:
    for token in _TOKEN_PATTERNS:
        if token.needle in text:
            pattern = _compiled(token.source)
            head = r"\g<head>" if "head" in pattern.groupindex else ""
            text = _sub_fixed(pattern, text, findings, head + marker(token.kind), token.kind)
    lowered = _lower(text)
    if ".eyj" in lowered:
        spans = [_Span(s, e, marker("jwt"), "jwt") for s, e in _jwt_spans(lowered)]
        text = _apply(text, spans, findings)
    if "eyJ" in text and (". " in text or ".\n" in text or ".\t" in text or ".\r" in text):
        text = _sub_fixed(_JWT_WRAPPED, text, findings, marker("jwt"), "jwt")
    if len(text) < 40:
        return text
    return _sub(_AWS_SECRET_LOWERED, text, findings, _aws_secret)


# ─── Tokens cut off at the edge of a text ──────────────────────────────────

# Upstream keeps cut copies of what it stores: a gist is a memory's first 100
# characters, a MEMORIA topic is cut to a length, a context snippet is a window
# around a match marked `...` where it was cut ("...d1r for the staging cluster").
# Of a token cut there, the piece left is too short for its pattern or has lost
# its prefix, yet it is part of the secret; an old store's rows (migrate, adopt)
# and a sleep over them are scrubbed in that shape.  A cut happens only at an
# end of the text, so only the ends are looked at:
# - the text ends inside a token of a known prefix (before `...` or `…`, if any);
#   prefixes that could start a word want a digit in what follows them;
# - a cut mark at the start or end of the text touches a random-looking run.
_CUT_PREFIXES = tuple(token for token in _TOKEN_PATTERNS if token.cut is not None)
# Searched over the last `_CUT_TAIL` characters only: constant time whatever the text.
_CUT_TAIL = 320
_CUT_END = lazy(
    "(?<![A-Za-z0-9_+/=-])(?:"
    + "|".join(f"(?P<c{i}>{token.cut})" for i, token in enumerate(_CUT_PREFIXES))
    + r")(?P<body>[A-Za-z0-9_.+/=-]{0,256})…?[ \t\r\n]{0,8}\Z")


def _literals(prefix: str) -> tuple[str, ...]:
    """Every literal a prefix pattern matches (`gh[pousr]_` → ghp_ … ghs_,
    `gl(?:pat|dt)-` → glpat- gldt-), for the cheap tests of `_may_end_cut` and
    `_redact_wrapped`: made of literals, `\\.`, `[...]` classes (ranges too) and
    `(?:a|b)` groups of such, not nested."""
    found = [""]
    rest = prefix
    while rest:
        if rest[0] == "[":
            close = rest.index("]")
            options, rest = _class_chars(rest[1:close]), rest[close + 1:]
        elif rest.startswith("(?:"):
            close = rest.index(")")
            options = [lit for alt in rest[3:close].split("|") for lit in _literals(alt)]
            rest = rest[close + 1:]
        elif rest[0] == "\\":
            options, rest = [rest[1]], rest[2:]
        else:
            options, rest = [rest[0]], rest[1:]
        found = [head + option for head in found for option in options]
    return tuple(found)


def _class_chars(inside: str) -> list[str]:
    """The characters of a `[...]` class (`A-Z0-9` spelled out)."""
    chars: list[str] = []
    at = 0
    while at < len(inside):
        if at + 2 < len(inside) and inside[at + 1] == "-":
            chars += [chr(c) for c in range(ord(inside[at]), ord(inside[at + 2]) + 1)]
            at += 3
        else:
            chars.append(inside[at])
            at += 1
    return chars


# The literal starts of the prefixes, for `_may_end_cut`: each up to its first `.`,
# as that test reads a word in pieces split at dots.
_CUT_LEADS = tuple(lit.split(".")[0] for token in _CUT_PREFIXES
                   for lit in _literals(token.cut or ""))
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+/=-")


def _may_end_cut(text: str) -> bool:
    """Whether the word `text` ends with could be a token `_CUT_END` looks for: a
    string test, so that a plain text never compiles that pattern (a cold hook
    process scrubs every prompt)."""
    end = text.rstrip(" \t\r\n")
    if end.endswith("…"):
        end = end[:-1]
    start = len(end)
    while start > max(0, len(end) - _CUT_TAIL) and end[start - 1] in _TOKEN_CHARS:
        start -= 1
    word = end[start:]
    # the pattern may also start right after a dot inside that run
    return bool(word) and any(piece.startswith(_CUT_LEADS) for piece in word.split("."))


_CUT_RUN = r"[A-Za-z0-9_+/=-]{8,256}"
_CUT_MARK = r"(?:\.{3}|…)"
_CUT_START = lazy(r"\A[ \t\r\n]{0,8}" + _CUT_MARK + "(?P<run>" + _CUT_RUN + ")")
_CUT_END_RUN = lazy(r"(?<![A-Za-z0-9_+/=-])(?P<run>" + _CUT_RUN + ")" + _CUT_MARK
                    + r"[ \t\r\n]{0,8}\Z")


def _redact_cut(text: str, findings: list[str]) -> str:
    """Redact the piece of a token a cut left at either end of `text` (see above)."""
    spans: list[_Span] = []
    tail = max(0, len(text) - _CUT_TAIL)
    if "..." in text or "…" in text:
        start = _CUT_START.match(text)
        if start is not None and _looks_random(start.group("run")):
            spans.append(_Span(*start.span("run"), marker("token"), "token"))
        end = _CUT_END_RUN.search(text, tail)
        if end is not None and _looks_random(end.group("run")):
            spans.append(_Span(*end.span("run"), marker("token"), "token"))
    cut = _CUT_END.search(text, tail) if _may_end_cut(text) else None
    if cut is not None:
        index = next(int(name[1:]) for name, value in cut.groupdict().items()
                     if name != "body" and value is not None)
        token = _CUT_PREFIXES[index]
        body = cut.group("body").rstrip(".")
        if body and (not token.cut_digit or any(c in _DIGITS for c in body)):
            spans.append(_Span(cut.start(), cut.start("body") + len(body), marker(token.kind),
                               token.kind))
    return _apply(text, spans, findings)


# ─── Tokens wrapped across two lines ───────────────────────────────────────

# A token copied from a narrow terminal or an editor that wraps lines arrives in
# two pieces: `sk-proj-AbCd…` then, on the next line (or after a space), the
# rest.  A piece after a known prefix is joined to the run that follows it when
# the token's own pattern takes the whole join; when the first piece is a whole
# token already, the run after the line break must itself look random (a word or
# a setting on the next line is not part of it).  AWS key ids (20 characters)
# are left out: their prefix is a single capital letter.  Each run is taken
# whole (possessive) and a piece starts only after a character no token holds,
# so a run of prefixes (`sk-sk-sk-…`) is read once, in linear time.
_WRAP_TOKENS = tuple(token for token in _CUT_PREFIXES if token.kind != "aws-access-key")


_WRAP_LEADS = tuple(lead for token in _WRAP_TOKENS for lead in _literals(token.cut or ""))
_WRAPPED = lazy(
    "(?<![A-Za-z0-9_+/-])(?:"
    + "|".join(f"(?P<w{i}>{token.cut})" for i, token in enumerate(_WRAP_TOKENS))
    + r")(?P<first>[A-Za-z0-9_+/-]{0,256}+)"
      r"(?P<gap>[ \t]{0,2}\\?\r?\n[ \t]{0,8}|[ \t])(?P<second>[A-Za-z0-9_+/-]{4,256}+)"
      r"(?![A-Za-z0-9_+/=.-])")


def _redact_wrapped(text: str, findings: list[str]) -> str:
    if not any(lead in text for lead in _WRAP_LEADS):
        return text
    spans: list[_Span] = []
    for match in _WRAPPED.finditer(text):
        index = next(int(name[1:]) for name, value in match.groupdict().items()
                     if name[0] == "w" and value is not None)
        token = _WRAP_TOKENS[index]
        pattern = _compiled(token.source)
        start = match.start()
        first = text[start:match.end("first")]
        second = match.group("second")
        whole = pattern.match(first)
        if whole is not None and whole.end() == len(first) and (
                "\n" not in match.group("gap") or len(second) < 8
                or not (_looks_random(second) and set(second) & _DIGITS)):
            continue  # a whole token, then a word or a setting
        joined = pattern.match(first + second)
        if joined is None or joined.end() != len(first) + len(second):
            continue
        spans.append(_Span(start, match.end(), marker(token.kind), token.kind))
    return _apply(text, spans, findings)


# ─── URL credentials ───────────────────────────────────────────────────────

# `scheme://user:password@host`, anchored on "://": the user part ends at the
# first colon, the password at the last `@` before a slash or a space.  For
# the schemes upstream's URL rule knows (matched as it does: the scheme ends
# so, in any case) the user goes too, so that rule cannot match the result.
_USERINFO = r"(?P<user>[^\s:/\"'<>]{0,128}):(?P<pw>[^\s/\"'<>]{1,256})@"
_UPSTREAM_SCHEME_BEHIND = "|".join(
    "(?<=" + "".join(f"[{c}{c.upper()}]" for c in name) + "://)"
    for name in ("postgres", "mysql", "mongodb", "redis"))
_URL_UPSTREAM = lazy(r"://(?:" + _UPSTREAM_SCHEME_BEHIND + ")" + _USERINFO)
_URL_OTHER = lazy(r"://(?!(?:[^\s:/\"'<>]{0,128}):(?:\$\{|\$[A-Za-z_]|\*{1,64}@|\.{3}@))"
                        + _USERINFO)
_SENTRY_DSN = lazy(r"://[0-9a-fA-F]{32}(?::[0-9a-fA-F]{32})?@")
# `https://<40 hex>@github.com/…`: a classic OAuth token as the URL's user.
_URL_HEX_USER = lazy(r"://[0-9a-fA-F]{40}@")


# A password with a `/` in it, or one space, as typed (`postgres://app:pa/ss@db/x`,
# `https://user:p w@host`): `_USERINFO` stops at both, since a URL without credentials
# has them there too (`https://host:8080/users/@me`, a path with an `@`).  Taken when
# the user is a plain name (no `@`), the password does not start as a port does (digits
# up to the `/` or the space: `host:8080/…`), holds at most one space, and a host name
# follows the `@` (not a digest: `image:tag/x@sha256:…`).
_URL_SLASHED = lazy(
    r"://(?P<user>[^\s:/@\"'<>]{0,128}):(?P<pw>[^\s@\"'<>/][^\s@\"'<>]{0,255}"
    r"(?:[ ][^\s@\"'<>]{1,128})?)@(?P<host>[A-Za-z0-9][A-Za-z0-9.-]{0,253})"
    r"(?![A-Za-z0-9.@-])")
_DIGEST_HOST = lazy(r"sha[0-9]{1,3}|md5|blake[0-9a-z]{0,4}")


def _url_slashed(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    password = match.group("pw")
    if "/" not in password and " " not in password:
        return None  # `_URL_UPSTREAM` and `_URL_OTHER` read it, or turned it down
    head = password.replace(" ", "/").split("/", 1)[0]
    if (head.isdigit() or match.group("user")[:1] == "["
            or _DIGEST_HOST.fullmatch(match.group("host").lower())):
        return None  # a port, an IPv6 host (`http://[::1]:8080/a@b`), a digest
    if " " in password and (text[match.end():match.end() + 1] not in ("", ":", "/", "?", "#")
                            and not text[match.end()].isspace()):
        return None
    if _is_placeholder(password) or password.startswith(("$", "{{", "<")):
        return None
    start = match.start("pw")
    scheme = _lower(text[max(0, match.start() - 8):match.start()])
    if scheme.endswith(("postgres", "mysql", "mongodb", "redis")):
        start = match.start("user")  # as `_URL_UPSTREAM`: the user goes too
        return start, match.end("pw"), ":" + marker("password"), "password"
    return start, match.end("pw"), marker("password"), "password"


def _redact_urls(text: str, findings: list[str]) -> str:
    if "://" not in text:
        return text
    text = _sub_fixed(_SENTRY_DSN, text, findings, f"://{marker('sentry-key')}@", "sentry-key")
    if "@" in text:
        text = _sub_fixed(_URL_HEX_USER, text, findings, f"://{marker('token')}@", "token")
    text = _replace_span(_URL_UPSTREAM, text, findings, "user", "pw", ":" + marker("password"),
                         "password")
    text = _replace_span(_URL_OTHER, text, findings, "pw", "pw", marker("password"), "password")
    if "@" in text and ("/" in text or " " in text):
        text = _sub(_URL_SLASHED, text, findings, _url_slashed, text)
    return text


# ─── Authorization headers, Bearer/Basic, curl -u (over the lowered text) ──

_AUTH_HEADER = lazy(
    r"(?P<head>authorization[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?"
    r"(?:(?:bearer|basic|token|digest|bot|negotiate|apikey|sso-key)[ \t]{1,4})?)"
    r"(?P<value>[a-z0-9._~+/=:-]{4,4096})")
_BEARER = lazy(
    r"bearer(?<![\w-]bearer)(?P<sep>[ \t]{1,4})(?P<value>[a-z0-9._~+/=-]{12,4096})")
_BASIC = lazy(
    r"basic(?<![\w-]basic)(?P<sep>[ \t]{1,4})(?P<value>[a-z0-9+/]{8,4096}={0,2})(?![a-z0-9+/=])")
_CURL_USER = lazy(
    r"(?P<head>-(?:u|-user)(?<![\w-]-u)(?<![\w-]--user)[ \t]{1,4}[\"']?[^\s:\"'/]{1,128}:)"
    r"(?P<value>[^\s\"']{1,256})")


def _decodes_to_userpass(value: str) -> bool:
    """`value` is base64 of `user:password` (HTTP Basic credentials)."""
    if len(value) < 8:
        return False
    try:
        plain = binascii.a2b_base64(value + "=" * (-len(value) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    user, colon, password = plain.partition(":")
    return bool(colon and password) and plain.isprintable()


def _value(match: re.Match[str], text: str) -> tuple[int, int, str]:
    start, end = match.span("value")
    return start, end, text[start:end]


def _header(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    start, end, value = _value(match, text)
    if _is_placeholder(value) or not (_weak_secret(value) or len(value) >= 20):
        return None
    return start, end, marker("auth-header"), "auth-header"


def _bearer(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    start, end, value = _value(match, text)
    if not (_looks_random(value) or (len(value) >= 20 and not value.isalpha())):
        return None
    return start, end, marker("bearer-token"), "bearer-token"


def _basic(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    start, end, value = _value(match, text)
    if not _decodes_to_userpass(value):
        return None
    return start, end, marker("basic-auth"), "basic-auth"


def _curl(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    start, end, value = _value(match, text)
    if value.isdigit() or len(value) < 3 or _is_placeholder(value):
        return None
    return start, end, marker("password"), "password"


# `Cookie: sessionid=…; csrftoken=…`, `Set-Cookie: session=…; Path=/`: a cookie's value
# is a session (8 characters or more); Set-Cookie's attributes stay.
_COOKIE_LINE = lazy(r"(?<![\w-])(?:set-)?cookie[\"']?[ \t]{0,4}:[ \t]{0,4}(?P<value>[^\n]{1,4096})")
_COOKIE_PAIR = lazy(r"(?:^|;)[ \t]{0,4}(?P<name>[^=;\s]{1,128})=(?P<value>[^;\s\"']{8,4096})")
_COOKIE_ATTRIBUTES = frozenset(("path", "expires", "max-age", "domain", "samesite", "priority"))


def _redact_cookies(text: str, findings: list[str], lowered: str) -> str:
    spans: list[_Span] = []
    for line in _COOKIE_LINE.finditer(lowered):
        base = line.start("value")
        for pair in _COOKIE_PAIR.finditer(line.group("value")):
            value = text[base + pair.start("value"):base + pair.end("value")]
            if pair.group("name") in _COOKIE_ATTRIBUTES or _is_placeholder(value):
                continue
            spans.append(_Span(base + pair.start("value"), base + pair.end("value"),
                               marker("cookie"), "cookie"))
    return _apply(text, spans, findings)


def _redact_auth(text: str, findings: list[str]) -> str:
    lowered = _lower(text)
    if "authorization" in lowered:
        text = _sub(_AUTH_HEADER, text, findings, _header)
    if "bearer" in lowered:
        text = _sub(_BEARER, text, findings, _bearer)
    if "basic" in lowered:
        text = _sub(_BASIC, text, findings, _basic)
    if "-u" in text:
        text = _sub(_CURL_USER, text, findings, _curl)
    if "cookie" in lowered:
        text = _redact_cookies(text, findings, _lower(text))
    return text


# ─── key = value (over the lowered text) ───────────────────────────────────

# The last word of a key that names a secret.  A key must *end* with one of
# these (`DB_PASSWORD`, `githubToken`, `aws_secret_access_key`), so
# `password_reset`, `max_tokens` and `tokenizer` are not keys of secrets.
# `password`, `secret`, `token`, `credentials` always name one; `key`, `pwd`,
# `auth` only when the value looks random, unless the key is a known kind of
# key (`api_key`, `signing_key` …); `pass` when it is a whole word (`DB_PASS`).
# (A short alternation of literals: the regex engine scans for it quickly.)
# The word for a password in other languages written in Latin or Cyrillic letters
# (German, French, Spanish, Portuguese, Dutch, Polish, Swedish, Turkish, Russian):
# `Passwort: …`, `mot de passe : …`, `пароль=…` (Chinese, Japanese and Korean ones are
# phrases: `_CJK_PHRASE`).
_FOREIGN_PASSWORDS = ("passwort", "kennwort", "mot de passe", "contraseña", "contrasena",
                      "senha", "wachtwoord", "hasło", "haslo", "lösenord", "losenord", "şifre",
                      "пароль")
_KEY_WORD = ("|".join(_FOREIGN_PASSWORDS)
             + r"|pass(?:word|wd|phrase|code)?|secret|token|credentials?|creds|key|pwd|pw|auth")
_STRONG_KEY_PREFIX = lazy(
    r"(?:api|access|private|account|master|signing|encryption|hmac|secret|"
    r"shared[_-]?access|app|client|consumer|session|jwt|aes|crypt)[_-]?\Z")
_KEYWORDS = ("pass", "secret", "token", "cred", "key", "pw", "auth", *_FOREIGN_PASSWORDS)
# `&` ends a value only where the next query parameter starts (`?password=x&ssl=true`);
# in prose or a config line it is part of the value (`password: Tr0ub&dor3`).
_NEXT_PARAM = lazy(r"&[a-z_][a-z0-9_.\[\]-]{0,64}=")
# A key and its value may be quoted with escaped quotes, as JSON inside a JSON
# string is (`"SecretString": "{\"password\":\"…\"}"`, a log line).
_KV = lazy(
    r"(?P<kw>" + _KEY_WORD + r")(?P<q>(?:\\?[\"'])?\]?)"
    r"(?P<sep>[ \t]{0,16}(?::=|=>|:|=)[ \t]{0,16})"
    r"(?P<value>\\\"[^\"\\\n]{0,1024}\\\"|"
    r"\"[^\"\n]{0,1024}\"|'[^'\n]{0,1024}'|`[^`\n]{1,1024}`|"
    r"\$\{[^{}\n]{0,128}\}|\{\{[^{}\n]{0,128}\}\}|"
    r"[^\s\"'`,;&)}\]<>{][^\s\"'`,;)}\]{]{0,1023}|"
    r"[\"'`][^\s\"'`]{1,1024})")
_WEAK_KEYWORDS = frozenset(("key", "pwd", "pw", "pass", "auth"))
_WORD_BEFORE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
# (A hook stores a turn as `[USER] …`: its role label starts the line as well.)
_LINE_LEAD = lazy(r"(?:\[(?:USER|ASSISTANT)\][ \t]{1,4})?"
                  r"[ \t]{0,32}(?:[-*][ \t]{1,8}|export[ \t]{1,8}|set[ \t]{1,8})?[\"']?")
_TRAILING = ".,;:!?)]}"
_PUNCTUATION = ".,;:!?"


def _weak_secret(value: str) -> bool:
    """A value that is a secret even under a vague key (`key`, `auth`, `pwd`)."""
    return _looks_random(value) or _decodes_to_userpass(value)


def _pw_value(value: str) -> bool:
    """A value under `pw` or `pwd` (`pw: hunter22`): a vague key's secret, or a password
    as people type one, 6 characters or more with a letter and a digit and no path or
    space in it (`pwd: /srv/app2` is a directory)."""
    if _weak_secret(value):
        return True
    if len(value) < 6 or any(c in "/\\ \t" for c in value):
        return False
    return any(c.isalpha() for c in value) and any(c in _DIGITS for c in value)


def _kind_for_key(key: str) -> str:
    lowered = key.lower().replace("-", "_")
    if "pass" in lowered or lowered.endswith(("pwd", "pw", *_FOREIGN_PASSWORDS)):
        return "password"
    if lowered.endswith("token"):
        return "token"
    if "secret" in lowered:
        return "secret"
    if "cred" in lowered:
        return "credentials"
    if lowered.endswith("key"):
        return "api-key" if "api" in lowered else "key"
    return "secret"


def _key_value_span(text: str, match: re.Match[str]) -> _Span | None:
    """The span of the value to redact for one key=value match (None: keep it)."""
    value_start, end = match.span("value")
    if "&" in match.group("value"):
        cut = _NEXT_PARAM.search(match.string, value_start, end)
        if cut is not None:
            end = cut.start()
    value = text[value_start:end]
    if len(value) < 2:
        return None
    keyword = match.group("kw")
    start = match.start()
    weak = _pw_value if keyword in ("pw", "pwd") else _weak_secret
    if keyword in _WEAK_KEYWORDS:
        window = text[max(0, start - 96):start]
        prefix = window[len(window.rstrip(_KEY_CHARS)):]
        if keyword == "pass":
            strong = not prefix or prefix[-1] in "_.-"
        else:
            strong = keyword == "key" and _STRONG_KEY_PREFIX.search(prefix.lower()) is not None
    else:
        prefix, strong = "", True
    if value[:2] == '\\"':  # escaped quotes: the inside goes, the quotes stay
        inner = value[2:-2] if len(value) >= 4 and value[-2:] == '\\"' else ""
        if not inner or _is_placeholder(inner) or (not strong and not weak(inner)):
            return None
        kind = _kind_for_key(prefix + keyword)
        return _Span(value_start + 2, end - 2, marker(kind), kind)
    closed = value[0] in "\"'`" and value[-1] == value[0]
    # What a vague key's value must be (as below), tested first: it is cheap.
    if not strong and not weak(value[1:-1] if closed else (
            value[1:] if value[0] in "\"'`" else value).rstrip(_TRAILING)):
        return None
    if _is_placeholder(value):
        return None
    if closed:
        # Quoted: the inside goes, the quotes stay.
        inner = value[1:-1]
        if not inner or _is_placeholder(inner) or (not strong and not weak(inner)):
            return None
        kind = _kind_for_key(prefix + keyword)
        return _Span(value_start + 1, end - 1, marker(kind), kind)
    config = strong and match.group("sep") != "=" and _at_line_start(text, start - len(prefix))
    if value[0] in "\"'`":  # an opening quote never closed on this line
        value_start += 1
        value = value[1:]
    elif keyword == "passphrase" and match.group("sep").strip() != "=":
        # `passphrase: correct horse battery staple`: words, to the end of the clause
        # (of the line on a config line, as any other key's value there)
        first = value.split(" ", 1)[0].rstrip(_TRAILING)
        stop = _passphrase_end(text, value_start, first)
        if stop is not None and not config:
            return _Span(value_start, stop, marker("password"), "password")
        if config and stop is None and (first.lower() in _STOPWORDS or _prose_verb(first)):
            return None  # `passphrase: required for every push`
    if config:
        # A config line (YAML, INI, TOML: `key: value`, `key = value`): the
        # value is the rest of the line, less a ` #` comment, so a multi-word
        # value goes whole.  `KEY=value` (shell, .env) ends at a space.
        value = _config_value(text, value_start, value_start + 1024)
    else:
        value = value.rstrip(_TRAILING)
    if not value or _is_placeholder(value):
        return None
    if not strong and not weak(value):
        return None
    if strong and value.split(" ", 1)[0].lower() in _STOPWORDS and not (
            config and keyword == "passphrase"):  # `passphrase: my dog has fleas 42`
        return None
    kind = _kind_for_key(prefix + keyword)
    return _Span(value_start, value_start + len(value), marker(kind), kind)


def _config_value(text: str, start: int, limit: int) -> str:
    """A config line's value from `start`: the rest of the line (up to `limit`), less
    a ` #` comment, ended by a clause's full-width punctuation (`password: hunter2，
    明天换掉`, read in ASCII)."""
    eol = text.find("\n", start, limit)
    rest = text[start:eol if eol >= 0 else min(len(text), limit)].split(_CLAUSE_MARK, 1)[0]
    comment = rest.find(" #")
    return (rest[:comment] if comment >= 0 else rest).rstrip()


def _at_line_start(text: str, key_start: int) -> bool:
    """Only a role label, indentation, a list dash, `export` or a quote before the key
    on its line."""
    while key_start > 0 and text[key_start - 1] in "\"'":
        key_start -= 1
    line_start = text.rfind("\n", max(0, key_start - 48), key_start) + 1
    if line_start == 0 and key_start > 48:
        return False
    return _LINE_LEAD.fullmatch(text, line_start, key_start) is not None


def _redact_key_values(text: str, findings: list[str]) -> str:
    lowered = _lower(text)
    if not any(word in lowered for word in _KEYWORDS):
        return text
    spans: list[_Span] = []
    floor = 0
    for match in _KV.finditer(lowered):
        if match.start() < floor:
            continue
        span = _key_value_span(text, match)
        if span is not None:
            spans.append(span)
            floor = span.end
    if spans:
        text = _apply(text, spans, findings)
        lowered = _lower(text)
    return _sub(_KV_SUFFIXED, text, findings, _suffixed_key, lowered)


# A key whose secret word has more words after it (`_KV` takes a key that ends with
# it): `"private_key_id": "3f9a…"`, `privateKeyId`, `secret_key_base`, `secret_id`.
# The words after the last secret word of the key say whether the value is the
# secret: a setting about it (`token_url`, `token_type`, `api_key_header`,
# `secret_name`, `private_key_path`) never is; the secret in some form
# (`client_secret_value`, `secret_key_base`, `private_key_pem`) is, as under `_KV`;
# under any other word (`private_key_id`, `secret_id`, `token_hash`) only a long
# random-looking token is (`_random_token`).  `key` names a secret only after a
# word that makes it one (`_STRONG_KEY_PREFIX`: `api_key_id`, not `key_id_format`).
# (Each word of `rest` is matched whole, as by an atomic group: a lookahead, then
# the text it saw; a key that ends with a secret word is `_KV`'s, and is turned down
# by the look-behinds before any callback.)
_KV_SUFFIXED = lazy(
    r"(?P<kw>pass(?:word|wd|phrase)|secret|token|credentials?|key)"
    r"(?P<rest>[_.-]?(?=(?P<word>[a-z0-9]{1,24}))(?P=word)"
    r"(?:[_.-](?=(?P<more>[a-z0-9]{1,24}))(?P=more)){0,3})"
    r"(?<!key)(?<!token)(?<!secret)(?<!password)(?<!passwd)(?<!passphrase)(?<!credential)"
    r"(?<!credentials)"
    r"[\"']?\]?[ \t]{0,16}(?::=|=>|:|=)[ \t]{0,16}"
    r"(?P<value>\"[^\"\n]{1,1024}\"|'[^'\n]{1,1024}'|[^\s\"'`,;&)}\]<>{]{1,1024})")
_KEY_WORD_SPLIT = lazy(r"[_.-]|(?<=[a-z0-9])(?=[A-Z])")
_SECRET_KEY_WORDS = frozenset(("password", "passwd", "passphrase", "secret", "token",
                               "credential", "credentials", "key"))
_KEY_SETTING_WORDS = frozenset("""
url uri urls endpoint endpoints path paths file filename files dir directory name names type types
header headers env var vars variable format field fields param params parameter length len size
bits ttl lifetime expiry expires expiration expire exp timeout ref refs reference arn version
versions policy prefix suffix hint label location source store provider mode method algorithm
alg scope scopes count limit max min enabled enable required rotation regex pattern template
placeholder help description desc title at issued created updated last used
""".split())  # noqa: SIM905 - a word list reads better as text
_KEY_VALUE_WORDS = frozenset("""
value data b64 base64 hex pem raw plain plaintext string str text bytes base content
""".split())  # noqa: SIM905 - a word list reads better as text
_TOKEN_VALUE = lazy(r"[A-Za-z0-9+/=_-]{16,4096}")


def _key_words(key: str) -> list[str]:
    """The words of a key, lowercased: `private_key_id`, `privateKeyId` → private key id."""
    return [word.lower() for word in _KEY_WORD_SPLIT.split(key) if word]


def _random_token(value: str) -> bool:
    """A long random-looking token: 16 or more hex digits and dashes with a letter and a
    digit (`3f9a…`, a UUID), or 16 or more characters of an API key's or base64's
    alphabet with upper case, lower case and a digit.  A path (`kv2/prod`), a name
    (`api-v2-prod`, `AWS_S3_KEY`), a URL, a host, a date or a sentence is none."""
    if _TOKEN_VALUE.fullmatch(value) is None:
        return False
    chars = set(value)
    if not chars & _DIGITS:
        return False
    if _HEX.fullmatch(value.replace("-", "")):
        return not chars <= _DIGITS | {"-"}
    return bool(chars & _UPPER and chars & _LOWER) and value[0] != "/"


def _suffixed_key(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    kw_start, kw_end = match.span("kw")
    rest = text[kw_end:match.end("rest")]
    # the secret word is a word of the key: a separator or a capital on each side
    if not (rest[0] in "_.-" or (rest[0].isupper() and not text[kw_end - 1].isupper())):
        return None  # `tokenizer`, `secretsManager`, `SECRETNAME`
    before = text[kw_start - 1] if kw_start else ""
    if before.isalnum() and not (text[kw_start].isupper() and not before.isupper()):
        return None  # `monkey_id`
    window = text[max(0, kw_start - 96):kw_start]
    words = _key_words(window[len(window.rstrip(_KEY_CHARS)):])
    first = len(words)
    words += [match.group("kw"), *_key_words(rest)]
    last = max(i for i in range(first, len(words)) if words[i] in _SECRET_KEY_WORDS)
    suffix = words[last + 1:]
    if not suffix or any(word in _KEY_SETTING_WORDS for word in suffix):
        return None  # `_KV`'s key, or a setting about the secret
    if words[last] == "key" and not _STRONG_KEY_PREFIX.search("_".join(words[:last]) + "_"):
        return None  # `key_id`, `sort_key_hash`
    start, end, value = _value(match, text)
    if value[0] in "\"'":
        start, end, value = start + 1, end - 1, value[1:-1]
        if value[-1:] == "\\":
            return None  # JSON in a string (`"{\"password\": …}"`): its own keys were read
    else:
        value = value.rstrip(_TRAILING)
        end = start + len(value)
    if not value or _is_placeholder(value):
        return None
    if all(word in _KEY_VALUE_WORDS for word in suffix):
        if value.lower() in _STOPWORDS:
            return None
    elif not _random_token(value):
        return None
    kind = _kind_for_key("_".join(words[:last + 1]))
    return start, end, marker(kind), kind


# ─── A secret named in one field, its value in another ─────────────────────

# Kubernetes `- name: DB_PASSWORD` + `value: …`, CloudFormation `"ParameterKey":
# "DBPassword", "ParameterValue": …`, an SSM parameter `"Name": "/prod/db/password",
# "Value": …`, .NET `<add key="DbPassword" value="…"/>`, Spring `<property
# name="password" value="…"/>`, Terraform `variable "db_password" { default = … }`,
# `aws ssm put-parameter --name /prod/db/password --value …`: the value's own key
# says nothing, the name before it says the value is a secret.  The value is the
# first value field after the name, before the next name field (Kubernetes'
# `valueFrom: {secretKeyRef: {name: …, key: …}}` names where the secret is, and
# holds none), a blank line, or `_NAMED_WINDOW` characters.
_NAME_FIELD = lazy(
    r"(?<![a-z0-9_-])(?:[\"']?(?:name|key|parameterkey|parameter_key)[\"']?[ \t]{0,4}[:=]"
    r"|variable|--name(?:[ \t]{0,4}=)?)[ \t]{0,4}"
    r"(?P<q>[\"']?)(?P<name>[a-z0-9_./:-]{1,128})(?P=q)(?![a-z0-9_./:-])")
_VALUE_FIELD = lazy(
    r"(?<![a-z0-9_-])(?:[\"']?(?:value|parametervalue|parameter_value|default)[\"']?"
    r"(?P<sep>[ \t]{0,4}[:=])|--value(?:[ \t]{0,4}=)?)[ \t]{0,4}"
    r"(?P<value>\"[^\"\n]{1,1024}\"|'[^'\n]{1,1024}'|[^\s\"'`,;)}\]<>{][^\s\"'`,;)}\]<>{]{0,1023})")
# The name of a secret: its last word (after a `/` or `:`, a path or an ARN) is one
# of `_KV`'s strong words, or a known kind of key.
_SECRET_NAME = lazy(
    r"(?:pass(?:word|wd|phrase)|secret|token|credentials?|pwd|(?:^|[_.-])pass|"
    r"(?:api|private|access|secret|signing|encryption|master|client)[_.-]?key)\Z")
_NAMED_WINDOW = 240
_BLANK_LINE = lazy(r"\n[ \t]*\n")


_SECRET_WORDS = ("pass", "secret", "token", "cred", "pwd", "key")


def _redact_named(text: str, findings: list[str]) -> str:
    lowered = _lower(text)
    if not (any(word in lowered for word in ("name", "key", "variable"))
            and ("value" in lowered or "default" in lowered)
            and any(word in lowered for word in _SECRET_WORDS)):
        return text
    names = [(m, last) for m in _NAME_FIELD.finditer(lowered)
             if _SECRET_NAME.search(last := re.split(r"[/:]", m.group("name"))[-1])]
    if not names:
        return text
    spans: list[_Span] = []
    for name, last in names:
        stop = min(len(lowered), name.end() + _NAMED_WINDOW)
        following = _NAME_FIELD.search(lowered, name.end(), stop)
        if following is not None:
            stop = following.start()
        blank = _BLANK_LINE.search(lowered, name.end(), stop)
        if blank is not None:
            stop = blank.start()
        field = _VALUE_FIELD.search(lowered, name.end(), stop)
        if field is not None:
            span = _named_value(text, field, _kind_for_key(last))
            if span is not None:
                spans.append(span)
    return _apply(text, spans, findings)


def _named_value(text: str, field: re.Match[str], kind: str) -> _Span | None:
    start, end, value = _value(field, text)
    if value[0] in "\"'":
        if value[-1] != value[0] or len(value) < 3:
            return None
        start, end, value = start + 1, end - 1, value[1:-1]
    elif field.group("sep") == ":" and _at_line_start(text, field.start()):
        value = _config_value(text, start, len(text))  # a YAML line
        end = start + len(value)
    else:
        value = value.rstrip(_TRAILING)
        end = start + len(value)
    if (len(value) < 2 or _is_placeholder(value) or value.lower() in _STOPWORDS
            or value.startswith(("${", "$(", "{{"))):
        return None
    return _Span(start, end, marker(kind), kind)


# A flag's value: a word that is not another flag, or a quoted string.
_FLAG_VALUE = r"(?P<value>[^\s\"'-][^\s\"']{0,255}|\"[^\"\n]{1,256}\"|'[^'\n]{1,256}')"
# `--password hunter2`, `--token abc` (the `=` form is a key=value).
_CLI_FLAG = lazy(
    r"(?P<head>--(?<![\w-]--)(?:password|passwd|pass|token|api-key|apikey|secret|"
    r"client-secret|access-token|auth-token|secret-string)[ \t]{1,4})" + _FLAG_VALUE)
# `mysql -u root -pS3cret` (the password glued to -p).
_MYSQL_P = lazy(r"(?P<head>(?:mysql|mysqldump|mysqladmin|mariadb)[^\n]{0,200}?[ \t]-p)"
                      r"(?P<value>[^\s\"']{1,256}|\"[^\"\n]{1,256}\"|'[^'\n]{1,256}')")


def _args(most: int) -> str:
    """Up to `most` words after a command word, before its flag (`-u admin --host db`)."""
    return r"(?P<args>(?:[ \t]{1,4}[^\s|;&]{1,200}){0," + str(most) + "}?)"


# `docker login -u bot -p S3cret registry`, `sshpass -p S3cret ssh host`,
# `mongosh -u admin -p S3cret`: a short `-p` that is a password only for these
# commands (`docker run -p 8080:80` is a port), and only as their own argument
# (`_same_command`).
_LOGIN_P = lazy(r"(?P<head>(?P<cmd>(?<![\w-])(?:(?:docker|podman|nerdctl|buildah|skopeo|oras|"
                r"crane|helm[ \t]{1,4}registry|az|oc|cf)[ \t]{1,4}login|sshpass|"
                r"twine[ \t]{1,4}upload))"
                + _args(8) + r"[ \t]{1,4}-p[ \t]{1,4})" + _FLAG_VALUE)
_MONGO_P = lazy(r"(?P<head>(?P<cmd>mongo(?<![\w-]mongo)"
                r"(?:sh|dump|restore|import|export|stat|top|files)?)"
                + _args(8) + r"[ \t]{1,4}-p[ \t]{1,4})" + _FLAG_VALUE)
# Words that end a command's arguments: another command, or a connective of prose
# (`redis-cli --scan then ls -a /tmp`, `with openssl so use curl -k https://…`).
_OTHER_COMMANDS = frozenset("""
curl wget ls cat cd mkdir rm rmdir cp mv ln echo printf grep egrep sed awk find xargs sudo su
chmod chown tar zip unzip docker podman kubectl helm ssh scp rsync git npm npx yarn pnpm pip
pip3 python python3 node deno sh bash zsh fish make systemctl service journalctl nc netcat
telnet psql mysql mongo mongosh redis-cli openssl htpasswd nginx apt apt-get yum dnf brew
touch tee head tail less more kill export env watch time nohup exec
then so and or but because while after before since instead also use using run try is are
was were needs need
""".split())  # noqa: SIM905 - a word list reads better as text
_PATH_START = ("/", "./", "../", "~/")
_PORT = lazy(r"(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}:)?[0-9]{1,5}(?:-[0-9]{1,5})?"
             r"(?::[0-9]{1,5}(?:-[0-9]{1,5})?)?(?:/(?:tcp|udp|sctp))?")


def _quoted_value(match: re.Match[str], text: str) -> tuple[int, int, str]:
    """The value's span and text, inside its quotes when it has them."""
    start, end, value = _value(match, text)
    if len(value) >= 2 and value[0] in "\"'`" and value[-1] == value[0]:
        return start + 1, end - 1, value[1:-1]
    return start, end, value


def _flag(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    start, end, value = _quoted_value(match, text)
    if value[:1] == "`" or _is_placeholder(value) or value.lower() in _STOPWORDS:
        return None  # an unclosed backtick opens a command substitution
    if start == match.start("value"):  # unquoted: `--password S3cret;` keeps its `;`
        end = start + len(value.rstrip(";,"))
        if end == start:
            return None
    kind = _kind_for_key(match.group("head").strip())
    return start, end, marker(kind), kind


def _cli_value(match: re.Match[str], text: str,
               ports: bool = False) -> tuple[int, int, str, str] | None:
    """A password given on a command line: not a `$(…)` or backtick substitution, a
    placeholder, a URL or a path (with `ports`, a port mapping such as `27017:27017`:
    mongo's own port flag is `--port`, so a bare number after its `-p` is a password); a `;` or `,`
    after it ends the command, not the password, and a backtick closes a code span."""
    start, end, value = _quoted_value(match, text)
    if value[:1] == "`" or _is_placeholder(value):
        return None
    if start == match.start("value"):  # unquoted (a closing backtick is markdown's)
        value = value.rstrip(";,`")
        end = start + len(value)
        if (not value or value.lower() in _STOPWORDS or "://" in value
                or value.startswith(_PATH_START)):
            return None
        if ports and ":" in value and _is_port(value):
            return None
    return start, end, marker("password"), "password"


def _is_port(value: str) -> bool:
    """A port (`27017`, at most 65535), a range, or a mapping (`8080:80`, `127.0.0.1:80:80/tcp`)."""
    if _PORT.fullmatch(value) is None:
        return False
    return ":" in value or int(value.split("/")[0].split("-")[0]) < 65536


def _same_command(match: re.Match[str], positional: int) -> bool:
    """The flag of `match` is an argument of its command word (group `cmd`): no other
    command or connective of prose in between, at most `positional` words that are
    neither a flag nor a flag's value, none ending a clause."""
    after_flag = False
    for word in match.string[match.end("cmd"):match.end("args")].split():
        if word in _OTHER_COMMANDS or word[-1] in ".,:":
            return False
        if word[0] == "-":
            after_flag = True
        elif after_flag:
            after_flag = False
        else:
            positional -= 1
            if positional < 0:
                return False
    return True


def _command_word(lowered: str, start: int) -> bool:
    """The word at `start` is a command, not another command's argument (`--name mongo`,
    `svc/mongo`, `mongo.conf`): only a directory or an opening `(` `$(` or quote may
    come before it in its word, and the word before is not a flag."""
    window = lowered[max(0, start - 64):start]
    cut = max(window.rfind(" "), window.rfind("\t"), window.rfind("\n"), window.rfind(_CLAUSE_MARK))
    prefix = window[cut + 1:].lstrip("`($\"'")
    if prefix and not (prefix.startswith(_PATH_START) and prefix[-1] == "/"):
        return False
    before = window[:cut + 1]
    words = before[before.rfind("\n") + 1:].split()
    # `--` ends another command's options and starts a command (`kubectl exec pod -- mongosh`)
    return not (words and len(words[-1]) > 1 and words[-1][0] == "-" and words[-1] != "--")


def _cli_password(positional: int, command_word: bool = False, ports: bool = False) -> Replace:
    """The callback for a command's password flag (see `_cli_value`, `_same_command`)."""
    def replace(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
        if command_word and not _command_word(match.string, match.start("cmd")):
            return None
        if not _same_command(match, positional):
            return None
        return _cli_value(match, text, ports)
    return replace


_TOOL_PASSWORD = _cli_password(2)
_MONGO_PASSWORD = _cli_password(1, command_word=True, ports=True)


# `htpasswd -b .htpasswd dana S3cret`, `htpasswd -nbB dana S3cret`: with `-b` the
# password is on the command line, after the file and the user (after the user
# alone with `-n`, which prints instead of writing a file).
_SHELL_ARG = r"\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'|;&]{1,256}"
_HTPASSWD = lazy(
    r"(?<![\w-])htpasswd(?P<flags>(?:[ \t]{1,4}-[a-z]{1,8}(?:[ \t]{1,4}[0-9]{1,3})?){1,6})"
    r"(?P<args>(?:[ \t]{1,4}(?:" + _SHELL_ARG + r")){2,3})")
_HTPASSWD_ARG = lazy(_SHELL_ARG)
_HTPASSWD_FLAG = lazy(r"-([A-Za-z]{1,8})")
# Words of a sentence about the command (`htpasswd -b is insecure because …`,
# `htpasswd -nb prints the hash`): no file, user or password is one of these.
_PROSE_ARGS = _STOPWORDS | frozenset("""
because since so then but if when which who what how why where while until unless
prints print shows show writes write creates create makes make takes take puts put
reads read asks ask needs need lets let puts uses used means mean flag flags option
options mode works work does do did has have had gets get returns return you we i they
""".split())  # noqa: SIM905 - a word list reads better as text


def _htpasswd(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    # The flags as typed: `-b` (batch: the password follows) is not `-B` (bcrypt).
    flags = _HTPASSWD_FLAG.findall(text, *match.span("flags"))
    if not any("b" in flag for flag in flags):
        return None
    args = list(_HTPASSWD_ARG.finditer(text, *match.span("args")))
    # FILE USER PASSWORD, or with `-n` USER PASSWORD
    index = 1 if any("n" in flag for flag in flags) else 2
    if len(args) <= index or any(arg.group().lower() in _PROSE_ARGS for arg in args[:index + 1]):
        return None
    start, end = args[index].span()
    value = text[start:end]
    if value[0] in "\"'" and value[-1] == value[0]:
        start, end, value = start + 1, end - 1, value[1:-1]
    elif value[0] == "`":  # a command substitution
        return None
    if _is_placeholder(value):
        return None
    return start, end, marker("password"), "password"


# `redis-cli -a S3cret`, `openssl enc -k S3cret` (`-K`: the raw key), and openssl's
# `-pass pass:S3cret` / `-passin` / `-passout`.
_REDIS_A = lazy(r"(?P<head>(?P<cmd>redis-cli(?<![\w-]redis-cli))" + _args(8)
                + r"[ \t]{1,4}-a[ \t]{1,4})" + _FLAG_VALUE)
_OPENSSL_K = lazy(r"(?P<head>(?P<cmd>openssl(?<![\w-]openssl))" + _args(12)
                  + r"[ \t]{1,4}-k[ \t]{1,4})" + _FLAG_VALUE)
_PASS_ARG = lazy(r"(?P<head>(?<![\w-])-pass(?:in|out)?[ \t]{1,4}pass:)(?P<value>[^\s\"']{1,256})")
# A `.pgpass` line, host:port:database:user:password, alone on its line.  Its
# password goes when the text names the file, or when it looks random.
_PGPASS = lazy(r"(?m)^[ \t]{0,8}[a-z0-9_.*\[\]-]{1,255}:(?:[0-9]{1,5}|\*):[a-z0-9_.*$-]{1,255}:"
               r"[a-z0-9_.*@$-]{1,255}:(?P<value>[^\s:]{4,256})[ \t]{0,8}$")


def _pgpass(named: bool) -> Replace:
    """`named`: the text mentions the file (looked up once per text, not per line)."""
    def replace(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
        start, end, value = _value(match, text)
        if _is_placeholder(value) or not (named or _looks_random(value)):
            return None
        return start, end, marker("password"), "password"
    return replace


# Flags whose meaning depends on their case (the patterns run over the lowered
# text; `_cased` checks the flag as typed): `sqlcmd -P S3cret` (`-p` prints
# statistics), `zip -P S3cret` (`unzip -p` pipes), `ldapsearch -w S3cret` (`-W`
# prompts); and `7z a -pS3cret` (glued), `keytool -storepass S3cret`.
_SQLCMD_P = lazy(r"(?P<head>(?P<cmd>(?<![\w-])(?:sqlcmd|bcp|osql))" + _args(10)
                 + r"[ \t]{1,4}(?P<flag>-p)[ \t]{0,4})" + _FLAG_VALUE)
_ZIP_P = lazy(r"(?P<head>(?P<cmd>(?<![\w-])(?:zip|unzip|zipcloak))" + _args(8)
              + r"[ \t]{1,4}(?P<flag>-p)[ \t]{1,4})" + _FLAG_VALUE)
_LDAP_W = lazy(r"(?P<head>(?P<cmd>(?<![\w-])ldap(?:search|modify|add|delete|passwd|whoami|"
               r"compare|modrdn|exop|url))" + _args(12)
               + r"[ \t]{1,4}(?P<flag>-w)[ \t]{1,4})" + _FLAG_VALUE)
_SEVEN_Z_P = lazy(r"(?P<head>(?P<cmd>(?<![\w-])7z[ar]?)" + _args(8) + r"[ \t]{1,4}-p)"
                  r"(?P<value>[^\s\"'-][^\s\"']{0,255}|\"[^\"\n]{1,256}\"|'[^'\n]{1,256}')")
_KEYTOOL_PASS = lazy(r"(?P<head>(?<![\w-])-(?:src|dest)?(?:storepass|keypass)(?![\w:-])[ \t]{1,4})"
                     + _FLAG_VALUE)
# `smbclient //srv/share -U bob%S3cret`: the password after the `%` of the user.
_SMB_USER = lazy(r"(?P<head>(?P<cmd>(?<![\w-])(?:smbclient|rpcclient|smbget|smbmap|smbcacls|winexe|"
                 r"net[ \t]{1,4}(?:rpc|ads|sam|use)))" + _args(8)
                 + r"[ \t]{1,4}(?:-u|--user(?:name)?)[ \t=]{1,4}[^\s%\"']{1,64}%)"
                 r"(?P<value>[^\s\"']{1,256})")
# `gh secret set NAME --body S3cret` (`-b S3cret`, `-bS3cret`): a secret's body, whatever
# its name.  `net use Z: \\srv\share /user:bob S3cret`: the word after the user.
_GH_SECRET = lazy(r"(?P<head>(?P<cmd>(?<![\w-])gh[ \t]{1,4}secret[ \t]{1,4}set)" + _args(6)
                  + r"[ \t]{1,4}(?:--body|-b)[ \t=]{0,4})" + _FLAG_VALUE)
_NET_USE = lazy(r"(?<![\w-])net[ \t]{1,4}use[ \t][^\n]{0,200}?/user:[^\s]{1,64}[ \t]{1,4}"
                r"(?P<value>[^\s/\"'][^\s\"']{0,255}|\"[^\"\n]{1,256}\"|'[^'\n]{1,256}')")
# `rabbitmqctl add_user admin S3cret`, `rabbitmqctl change_password admin S3cret`.
_RABBITMQ = lazy(r"(?<![\w-])rabbitmqctl(?:[ \t]{1,4}-[a-z-]{1,20}(?:[ \t]{1,4}[^\s-][^\s]{0,64})?)"
                 r"{0,3}[ \t]{1,4}(?:add_user|change_password|authenticate_user)[ \t]{1,4}"
                 r"[^\s\"']{1,64}[ \t]{1,4}(?P<value>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|"
                 r"[^\s\"'|;&]{1,256})")
# fish `set -gx DB_PASSWORD S3cret`, Windows `setx DB_PASSWORD S3cret`: a variable
# named as a secret (`_SECRET_NAME`), set to the word after it.
_SET_VAR = lazy(r"(?<![\w-])(?:set(?:[ \t]{1,4}-[a-z]{1,4}){1,3}|setx)[ \t]{1,4}"
                r"(?P<name>[a-z_][a-z0-9_]{0,63})[ \t]{1,4}"
                r"(?P<value>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'|;&]{1,256})")
# SQL: `CREATE USER app IDENTIFIED BY 'S3cret'`, `GRANT … IDENTIFIED WITH
# mysql_native_password BY '…'`; unquoted (Oracle's `IDENTIFIED BY tiger`) only in a
# statement that creates, alters or grants.
_IDENTIFIED_BY = lazy(r"(?<![\w-])identified[ \t]{1,4}(?:with[ \t]{1,4}[a-z0-9_]{1,40}[ \t]{1,4})?"
                      r"by[ \t]{1,4}(?:password[ \t]{1,4})?"
                      r"(?P<value>'[^'\n]{1,256}'|\"[^\"\n]{1,256}\"|[^\s;'\"]{1,256})")
_SQL_STATEMENT = lazy(r"(?<![\w-])(?:create|alter|grant)(?![\w-])")
# What is piped into a command that reads a secret from its input:
# `echo S3cret | docker login -u bot --password-stdin`, `echo S3cret | sudo -S …`,
# `echo 'bob:S3cret' | chpasswd`, `printf %s S3cret | wrangler secret put NAME`.
_PIPED = lazy(r"(?<![\w-])(?:echo|printf)(?:[ \t]{1,4}-[a-z]{1,3}){0,2}"
              r"(?:[ \t]{1,4}(?:'%s(?:\\n)?'|\"%s(?:\\n)?\"|%s))?[ \t]{1,4}"
              r"(?P<value>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'|;&]{1,256})[ \t]{0,4}\|"
              r"(?P<cmd>[^\n|;&]{1,200})")
_READS_SECRET = lazy(r"--password-stdin|-password-stdin|chpasswd|--with-token|"
                     r"(?<![\w-])sudo[ \t][^\n]{0,40}-s(?![\w-])|"
                     r"secrets?[ \t]{1,4}(?:put|set|create|add)|passwd[ \t][^\n]{0,40}--stdin|"
                     r"env[ \t]{1,4}add|vault[ \t]{1,4}login")


def _cased(flag: str) -> Replace:
    """A `_TOOL_PASSWORD` whose flag (group `flag`) is `flag` as typed."""
    def replace(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
        start = match.start("flag")
        if text[start:start + len(flag)] != flag:
            return None
        return _TOOL_PASSWORD(match, text)
    return replace


def _set_var(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    if _SECRET_NAME.search(match.group("name")) is None:
        return None
    return _cli_value(match, text)


def _identified_by(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    if match.group("value")[0] not in "'\"":
        line = match.string[match.string.rfind("\n", 0, match.start()) + 1:match.start()]
        if _SQL_STATEMENT.search(line) is None:
            return None
    return _cli_value(match, text)


def _piped(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    if _READS_SECRET.search(match.group("cmd")) is None:
        return None
    found = _cli_value(match, text)
    if found is None:
        return None
    start, end, replacement, kind = found
    if "chpasswd" in match.group("cmd"):  # `user:password`: the user stays
        colon = text.find(":", start, end)
        if colon < 0:
            return None
        start = colon + 1
    if text[start:end].startswith("$") or _is_placeholder(text[start:end]):
        return None
    return start, end, replacement, kind


def _redact_flags(text: str, findings: list[str]) -> str:
    # The keywords are looked for in the text the patterns run on (`_lower`), once:
    # `Redis-cli -a …`, `OpenSSL enc -k …`, `Az Login -p …`.
    lowered = _lower(text)
    if "redis-cli" in lowered:
        text = _sub_commands(_REDIS_A, text, findings, _TOOL_PASSWORD)
    if "openssl" in lowered:
        text = _sub_commands(_OPENSSL_K, text, findings, _TOOL_PASSWORD)
        text = _sub(_PASS_ARG, text, findings, _cli_value)
    if text.count(":") >= 4:
        text = _sub(_PGPASS, text, findings, _pgpass("pgpass" in lowered))
    if "htpasswd" in lowered:
        text = _sub(_HTPASSWD, text, findings, _htpasswd)
    if "--" in text:
        text = _sub(_CLI_FLAG, text, findings, _flag)
    if "-p" in lowered:
        if "sqlcmd" in lowered or "bcp" in lowered or "osql" in lowered:
            text = _sub_commands(_SQLCMD_P, text, findings, _cased("-P"))
        if "zip" in lowered:
            text = _sub_commands(_ZIP_P, text, findings, _cased("-P"))
        if "7z" in lowered:
            text = _sub_commands(_SEVEN_Z_P, text, findings, _TOOL_PASSWORD)
    if "ldap" in lowered and "-w" in lowered:
        text = _sub_commands(_LDAP_W, text, findings, _cased("-w"))
    if "storepass" in lowered or "keypass" in lowered:
        text = _sub(_KEYTOOL_PASS, text, findings, _cli_value)
    if "%" in text and any(word in lowered for word in ("smb", "rpcclient", "winexe", "net ")):
        text = _sub_commands(_SMB_USER, text, findings, _TOOL_PASSWORD)
    if "secret" in lowered and "gh" in lowered:
        text = _sub_commands(_GH_SECRET, text, findings, _TOOL_PASSWORD)
    if "/user:" in lowered:
        text = _sub(_NET_USE, text, findings, _cli_value)
    if "rabbitmqctl" in lowered:
        text = _sub(_RABBITMQ, text, findings, _cli_value)
    if ("set -" in lowered or "setx" in lowered) and any(word in lowered for word in _SECRET_WORDS):
        text = _sub(_SET_VAR, text, findings, _set_var)
    if "identified" in lowered:
        text = _sub(_IDENTIFIED_BY, text, findings, _identified_by)
    if "|" in text and ("echo" in lowered or "printf" in lowered):
        text = _sub(_PIPED, text, findings, _piped)
    if "-p" in lowered:
        if "mysql" in lowered or "mariadb" in lowered:
            text = _sub(_MYSQL_P, text, findings, _cli_value)
        if "login" in lowered or "sshpass" in lowered or "twine" in lowered:
            text = _sub_commands(_LOGIN_P, text, findings, _TOOL_PASSWORD)
        if "mongo" in lowered:
            text = _sub_commands(_MONGO_P, text, findings, _MONGO_PASSWORD)
    return text


# ─── Phrases (over the lowered text) ───────────────────────────────────────

# "my password is hunter2", "the password for staging is 'a b c'",
# "the signing key is 9f86…"; bare: "use key 3q2+7w…" (random values only).
_PHRASE_KEYWORD = (
    r"(?P<kw>pass(?:word|phrase|code)|passwd|key|secret|token)")
_PHRASE_VALUE = r"(?P<value>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|`[^`\n]{1,256}`|[^\s\"'`<>]{1,256})"
_PHRASE = lazy(
    _PHRASE_KEYWORD +
    # "for staging", "for db.example.com", "for admin@example.com": a `.` or `:` only
    # inside a word (a host, a port), never one that ends a sentence
    r"(?P<ctx>[ \t]{1,4}(?:for|of|to|on)[ \t]{1,4}"
    r"(?:[^\n.,;:!?=]|[.:](?=[^\s.,;:!?=])){1,40}?)?"
    r"(?P<verb>(?:[ \t]{1,4}(?:is|was|will[ \t]be|should[ \t]be)|['’]s)(?:[ \t]{0,4}:)?[ \t]{1,4}"
    r"(?:now[ \t]{1,4}|still[ \t]{1,4}|just[ \t]{1,4}|set[ \t]to[ \t]{1,4})?"
    # "the password for staging = …" (with no "for …", `password: …` is a key=value)
    r"|(?(ctx)[ \t]{0,4}(?::=|==|=>|[:=])[ \t]{0,4}(?![=>:])|(?!)))" + _PHRASE_VALUE)
_BARE = lazy(_PHRASE_KEYWORD + r"(?P<verb>[ \t]{1,4})" + _PHRASE_VALUE)
_PASSWORD_WORDS = ("password", "passphrase", "passcode", "passwd")
# "use Tr0ub4dor3 as the password", "with 'a b c' as the new passphrase".
_USE_AS = lazy(
    r"(?<![\w-])(?:use|try|with|using)[ \t]{1,4}"
    r"(?P<value>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|`[^`\n]{1,256}`|[^\s\"'`<>]{1,256})"
    r"[ \t]{1,4}as[ \t]{1,4}(?:(?:the|a|an|my|your|our|its)[ \t]{1,4})?"
    r"(?:[a-z0-9_-]{1,20}[ \t]{1,4}){0,2}(?P<head>pass(?:word|phrase|code)|passwd)"
    # the end of the clause, or "for/of/on X": "as the password hash" is a hash
    r"(?=[ \t]{0,4}(?:[.,;:!?)\]\"'`\n]|\Z)|[ \t]{1,4}(?:for|of|on)(?![a-z0-9_-]))")
_PIN = lazy(r"(?<![\w-])pin(?:[ \t]{1,4}(?:code|number))?[ \t]{1,4}(?:is|was)"
                  r"(?:[ \t]{0,4}:)?[ \t]{1,4}(?P<value>[0-9]{4,12})(?![0-9])")
_PHRASE_WORDS = ("pass", "pin", "key", "secret", "token")
# "set the wifi password to Sunshine2024!", "changed the admin password to …".
_SET_TO = lazy(
    r"(?<![\w-])(?:set|sets|change|changes|changed|reset|resets|update|updates|updated|"
    r"rotate|rotated)[ \t]{1,4}(?:[^\n.,;:!?=]{1,40}?[ \t]{1,4})?"
    r"(?P<kw>pass(?:word|phrase|code)|passwd)(?P<verb>[ \t]{1,4}to[ \t]{1,4})" + _PHRASE_VALUE)
# Chinese, Japanese, Korean: "数据库密码是 …", "密码：…", "【密码】…", "パスワードは …",
# "비밀번호는 …".
# A password word with a connector (or a colon) names its value; a key or token
# word, or a password word with none, only a value that looks random.  Secrets
# are ASCII, so the value is the run of printable ASCII after it.
_CJK_SECRET_WORDS = ("密码", "口令", "密钥", "秘钥", "私钥", "令牌", "パスワード", "비밀번호")
_CJK_PHRASE = lazy(
    r"(?P<kw>密码|口令|密钥|秘钥|私钥|令牌|パスワード|비밀번호)"
    r"(?P<verb>[ \t]{0,4}】?[ \t]{0,4}(?:就?是|(?P<weak>[还都也])是|为|為|：|:|=|"
    r"(?:已经?|被)?(?:改成了?|改为|改為|设为|设置为|設為|设置成了?|设成了?|换成了?|"
    r"更新为|更新成了?|修改为|修改成了?|重置为|重置成了?)|"
    r"は|が|는|은|가)?"
    r"[ \t]{0,4}(?:[:：=][ \t]{0,4})?)"  # "密码是：…": a word, then a colon
    r"(?P<value>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|`[^`\n]{1,256}`|“[^”\n]{1,256}”|"
    r"「[^」\n]{1,256}」|[!#-~]{1,256})")
_QUOTES = {"\"": "\"", "'": "'", "`": "`"}
_CJK_QUOTES = {**_QUOTES, "“": "”", "「": "」"}
_CJK_KINDS = {"密码": "password", "口令": "password", "パスワード": "password",
              "비밀번호": "password", "令牌": "token"}
# Markup and Dockerfiles: `<password>…</password>`, `ENV API_TOKEN …` (its legacy,
# `=`-less form; `ENV KEY=value` is a key=value).
_XML_SECRET = lazy(
    r"<(?P<tag>[a-z0-9_.:-]{0,40}(?:password|passwd|secret|token|api[_-]?key|apikey|"
    r"access[_-]?key|private[_-]?key|credentials?))>(?P<value>[^<\n]{1,512})</(?P=tag)>")
_DOCKER_ENV = lazy(
    r"(?m)^[ \t]{0,32}env[ \t]{1,8}(?P<key>[a-z0-9_.-]{0,64}(?:password|passwd|secret|token|"
    r"api_?key|access_?key|private_?key|credentials?))[ \t]{1,8}(?P<value>[^\s=][^\n]{0,1023})")


# Where the words of a passphrase end: a sentence's or a clause's punctuation, a
# line's end, a ` #` comment.
_CLAUSE_END = lazy(r"[.;,!?](?=\s|\Z)|\n|[ \t]#|\x1f")


def _passphrase_end(text: str, start: int, first: str) -> int | None:
    """Where a passphrase of several words starting at `start` ends, or None.

    "correct horse battery staple", "my dog has fleas 42": plain words, up to
    the end of the clause (at most 256 characters).  None when the first word
    (`first`) is not a plain word (one token, as any password: the caller's
    rule applies), or when the words read as prose: a stop word first ("stored
    in the vault", "required for every push"), unless at least three words
    with a digit among them follow within 64 characters; a verb or participle
    first (`_prose_verb`: "rotated every 90 days") is always prose.  A text can hold a
    phrase every few characters, so prose is told within the short window."""
    if not first.isalpha() or _prose_verb(first):
        return None  # "is rotated every 90 days", "is cached by gpg-agent for 10 minutes"
    if first.lower() in _STOPWORDS:
        window = _clause(text, start, 64)
        if not any(ch.isdigit() for ch in window) or len(window.split(None, 2)) < 3:
            return None
    clause = _clause(text, start, 256)
    return start + len(clause) if len(clause.split(None, 1)) == 2 else None


def _clause(text: str, start: int, most: int) -> str:
    limit = min(len(text), start + most)
    cut = _CLAUSE_END.search(text, start, limit)
    return text[start:cut.start() if cut else limit].rstrip()


def _named_secret(match: re.Match[str], text: str, quotes: dict[str, str], *,
                  password: bool, kind_if_random: str, words: bool = False,
                  raw_placeholder: bool = False) -> tuple[int, int, str, str] | None:
    """The value a phrase names ("my password is …", "密码是 …").

    A password word that names its value (a verb, a colon, or quotes) redacts
    any value but a placeholder or a prose word; any other keyword only a value
    that looks random.  A value that opens a quote counts as quoted; its quotes
    are kept when it closes them.  With `words` (a passphrase) an unquoted
    value may be several words (`_passphrase_end`); with `raw_placeholder` the
    value as matched, quotes and all, is also checked for a placeholder.
    Cheapest test first: a text can hold a match every few characters."""
    start, end, value = _value(match, text)
    close = quotes.get(value[0])
    quoted = close is not None
    closed = quoted and value[-1] == close
    verb = match.group("verb")
    # "password's": as often "the password's hash" as a value; only a random one counts
    named = verb.strip() != "" and not verb.startswith(("'", "’"))
    if closed:
        start, end, inner = start + 1, end - 1, value[1:-1]
    else:
        inner = value.rstrip(_TRAILING)
        end = start + len(inner)
    if not inner:
        return None
    if password and (quoted or named):
        kind = "password"
    elif _looks_random(inner):
        kind = kind_if_random
    else:
        return None
    if _is_placeholder(inner) or (raw_placeholder and value != inner and _is_placeholder(value)):
        return None
    if not closed:
        bare = value.rstrip(_PUNCTUATION)
        if bare != inner and _is_placeholder(bare):  # `${DB_PASSWORD},`: the `}` is its own
            return None
        if value.startswith("{{"):  # a template with spaces inside: `{{ vault_pw }}`
            shut = text.find("}}", start, min(len(text), start + 130))
            if shut >= 0 and _is_placeholder(text[start:shut + 2]):
                return None
    if kind == "password" and not quoted:
        if words:
            stop = _passphrase_end(text, start, inner)
            if stop is not None:
                return start, stop, marker(kind), kind
        if inner.lower() in _STOPWORDS or _prose_verb(inner):
            return None
    return start, end, marker(kind), kind


def _phrase(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    begin = match.start()
    if begin and text[begin - 1] in _WORD_BEFORE:
        return None  # "monkey is", "tokens": not the keyword
    keyword = match.group("kw")
    return _named_secret(match, text, _QUOTES, password=keyword in _PASSWORD_WORDS,
                         kind_if_random=_kind_for_key(keyword), words=keyword == "passphrase")


def _redact_phrases(text: str, findings: list[str]) -> str:
    if not text.isascii() and any(word in text for word in _CJK_SECRET_WORDS):
        text = _sub(_CJK_PHRASE, text, findings, _cjk_phrase)
    lowered = _lower(text)
    if "mnemonic" in lowered or "助记词" in text or (
            ("phrase" in lowered or "words" in lowered or "seed" in lowered)
            and any(word in lowered for word in _SEED_WORDS)):
        text = _sub(_SEED_LABEL, text, findings, _seed_phrase)
        lowered = _lower(text)
    if not any(word in lowered for word in _PHRASE_WORDS):
        return text
    if "pin" in lowered:
        text = _replace_span(_PIN, text, findings, "value", "value", marker("pin"), "pin",
                             lowered=True)
    if " to " in lowered:
        text = _sub(_SET_TO, text, findings, _set_to)
    if " as " in lowered and "pass" in lowered:
        text = _sub(_USE_AS, text, findings, _flag)
    text = _sub(_PHRASE, text, findings, _phrase)
    return _sub(_BARE, text, findings, _phrase)


# A wallet's seed phrase (BIP-39): a label, then 12, 15, 18, 21 or 24 lowercase words
# of 3 to 8 letters (the list's words), each after a space or a line break.  The
# label must name the phrase and be followed by a colon, `=`, `is`/`are` or a line
# break ("the mnemonic for this instruction" is not one); prose reads as a run of
# short words ("is", "a", "to" break it) or of the words that glue a sentence.  Of a
# longer run the longest phrase goes (`… yellow keep it safe`); a line break after a
# phrase of a full length ends it (the next line is not part of it).
_SEED_LABEL = lazy(
    r"(?:seed[ \t](?:phrase|words)|mnemonic(?:[ \t](?:phrase|words|seed|code))?|"
    r"(?:recovery|backup|secret[ \t]recovery|wallet)[ \t](?:phrase|words|seed)|助记词)"
    r"(?P<sep>[ \t]{0,4}(?:[:=：][ \t]{0,4}|(?:is|are|was)[ \t]{1,4}(?::[ \t]{0,4})?)"
    r"(?:\r?\n[ \t]{0,8})?|[ \t]{0,4}\r?\n[ \t]{0,8})[\"'`“「]?")
_SEED_COUNTS = (12, 15, 18, 21, 24)
_SEED_WORDS = ("seed", "recovery", "backup", "wallet")
_SEED_PROSE = frozenset("""
the and for that this with from which into are was were not but has have had will can its
you your they them their what when where who how than then there these those been being
""".split())  # noqa: SIM905 - a word list reads better as text


def _seed_phrase(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    start = match.end()
    limit = min(len(text), start + 24 * 16)
    ends: list[int] = []  # where each word of the phrase ends
    at = start
    while len(ends) < max(_SEED_COUNTS) and at < limit:
        stop = at
        while stop < limit and text[stop] not in " \t\r\n":
            stop += 1
        word = text[at:stop]
        bare = word.rstrip(".,;") if len(ends) >= min(_SEED_COUNTS) - 1 else word
        if not (3 <= len(bare) <= 8 and bare.isascii() and bare.isalpha() and bare.islower()):
            break
        ends.append(at + len(bare))
        at = stop
        while at < limit and at - stop < 12 and text[at] in " \t\r\n":
            at += 1
        if bare != word or at == stop or ("\n" in text[stop:at] and len(ends) in _SEED_COUNTS):
            break  # a phrase of a full length ends with its line
    size = max((n for n in _SEED_COUNTS if n <= len(ends)), default=0)
    if not size:
        return None
    words = text[start:ends[size - 1]].split()
    if sum(word in _SEED_PROSE for word in words) > 1:
        return None
    # one word in twenty of the list has three letters; a list of instructions
    # (`mnemonic:\npush pop call ret jmp …`) is mostly such words
    if sum(len(word) == 3 for word in words) > size // 4:
        return None
    return start, ends[size - 1], marker("seed-phrase"), "seed-phrase"


def _set_to(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    """"set the password to …": a quoted value, or one with a digit or a symbol
    ("to something only you know" is prose)."""
    value = match.group("value")
    if value[0] not in "\"'`" and value.rstrip(_TRAILING).isalpha():
        return None
    return _phrase(match, text)


# What ends a clause after a value: "账号密码都是 admin。", "…还是 123456，记得改".
_CJK_CLAUSE_END = frozenset("\n。，；、,.;!?！？)）" + _CLAUSE_MARK)
# What "密码都是/还是 …" says of the passwords rather than what they are: how they are
# stored or who manages them ("密码还是 SSO，不用单独记", "密码都是 bcrypt，加密存储").
_PASSWORD_SCHEMES = frozenset("""
bcrypt scrypt argon2 argon2i argon2d argon2id pbkdf2 md5 sha1 sha256 sha512 hash hashed salted
sso ldap saml oauth oauth2 oidc kerberos ad totp otp mfa 2fa
""".split())  # noqa: SIM905 - a word list reads better as text


def _ends_clause(text: str, end: int, value: str) -> bool:
    """Nothing but a clause's end follows `value` (which ends at `end`)."""
    if value[-1:] in _CJK_CLAUSE_END:
        return True
    after = text[end:end + 8].lstrip(" \t")
    return not after or after[0] in _CJK_CLAUSE_END


def _cjk_phrase(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    kind = _CJK_KINDS.get(match.group("kw"), "key")
    # "密码都是/还是/也是 …" ("are all", "is still", "is also") as often says what the
    # passwords are like (`bcrypt 加密存储`, `SSO 统一管理`, `8 位以上`): a value there is a
    # password when it ends the clause ("密码都是 admin"), unless it names a scheme
    # (`_PASSWORD_SCHEMES`: "密码还是 SSO，…"), else only a random one
    value = match.group("value")  # lowercase: the match is over the lowered text
    named = match.start("weak") < 0 or (_ends_clause(text, match.end("value"), value)
                                        and value.rstrip(_TRAILING) not in _PASSWORD_SCHEMES)
    return _named_secret(match, text, _CJK_QUOTES, password=kind == "password" and named,
                         kind_if_random=kind, raw_placeholder=True)


def _markup(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    start, end, value = _value(match, text)
    inner = value.strip()
    if _is_placeholder(inner):
        return None
    start += len(value) - len(value.lstrip())
    end -= len(value) - len(value.rstrip())
    kind = _kind_for_key(match.group("tag" if "tag" in match.re.groupindex else "key"))
    return start, end, marker(kind), kind


# A secret's value held on the lines after its key: a YAML block scalar
# (`password: |`, `api_key: >-`), a triple-quoted string (`API_KEY = """`), string
# pieces in parentheses (`SECRET = (`), a shell line continued with a backslash, or
# a JSON value on the next line (`"password":` then `"…"`).  The key names a
# secret; the value is taken only when it reads as one (a password: one word;
# another secret: random-looking once its pieces are joined), so a block that
# describes the field keeps its prose.  Looked for only when the text holds such
# an opener.
_HELD_OPENERS = (": |", ":|", ": >", ":>", '"""', "'" * 3, "= (", "=(", "\\\n", '":\n',
                 '":\r\n')
_HELD_WORDS = ("pass", "pwd", "secret", "token", "key", "cred")
_HELD_OPENER = lazy(
    r"(?im)^(?:\[[a-z]{2,12}\][ \t]+)?(?P<indent>[ \t]*)(?:export[ \t]+)?"
    r"(?:[^\n]{0,200}?[{,][ \t]*)?[\"']?"
    r"(?P<key>[a-z0-9_.-]{0,40}?"
    r"(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|private[_-]?key|"
    r"access[_-]?key|credentials?))[\"']?[ \t]*[:=][ \t]*"
    r"(?P<open>[|>][-+]?|\"\"\"|'''|\(|\\|)[ \t]*\r?$")
_HELD_LINES = 40


def _redact_held(text: str, findings: list[str]) -> str:
    if "\n" not in text or not any(opener in text for opener in _HELD_OPENERS):
        return text
    lowered = _lower(text)
    if not any(word in lowered for word in _HELD_WORDS):
        return text
    spans = [span for match in _HELD_OPENER.finditer(text)
             if (span := _held_span(text, match)) is not None]
    return _apply(text, spans, findings)


def _held_span(text: str, match: re.Match[str]) -> _Span | None:
    opener, indent = match.group("open"), len(match.group("indent").expandtabs())
    lines = text[match.end():].split("\n", _HELD_LINES + 1)[1:_HELD_LINES + 1]
    at = match.end() + 1  # where `lines[0]` starts
    kept: list[tuple[int, int]] = []  # (start, end) of each line's content
    for line in lines:
        body = line.rstrip("\r")
        stripped = body.strip()
        lead = len(body) - len(body.lstrip())
        if opener in ('"""', "'" * 3):
            close = body.find(opener)
            if close >= 0:
                if body[:close].strip():
                    kept.append((at + lead, at + len(body[:close].rstrip())))
                break
        elif opener == "(":
            if stripped.startswith(")"):
                break
        elif opener[:1] in ("|", ">"):
            if stripped and len(body[:lead].expandtabs()) <= indent:
                break
        elif not stripped:
            break
        if stripped:
            kept.append((at + lead, at + lead + len(stripped)))
        if opener in ("\\", ""):
            break  # one line: the continued command's, or the JSON value
        at += len(line) + 1
    if not kept:
        return None
    start, end = kept[0][0], kept[-1][1]
    value = text[start:end]
    if opener == "":
        quoted = value.rstrip(",}] \t")
        if len(quoted) < 3 or quoted[0] not in "\"'" or quoted[-1] != quoted[0]:
            return None  # JSON wants a quoted value here; YAML's nested keys are none
        start, end, value = start + 1, start + len(quoted) - 1, quoted[1:-1]
    pieces = "".join(piece.strip("\"'` ,+") for piece in value.split("\n"))
    kind = _kind_for_key(match.group("key"))
    if not pieces or _is_placeholder(pieces) or pieces.startswith(("${", "$(", "{{")):
        return None
    if kind == "password":
        secret = " " not in pieces and len(pieces) >= 3 and pieces.lower() not in _STOPWORDS
    else:
        secret = " " not in pieces and (_looks_random(pieces) or _random_token(pieces))
    return _Span(start, end, marker(kind), kind) if secret else None


def _redact_markup(text: str, findings: list[str]) -> str:
    lowered = _lower(text)
    if "</" in lowered:
        text = _sub(_XML_SECRET, text, findings, _markup)
    if "env" in lowered:
        text = _sub(_DOCKER_ENV, text, findings, _markup)
    if "|" in text and "--" in text and any(word in lowered for word in _TABLE_WORDS):
        text = _redact_tables(text, findings)
    return text


# A Markdown table of credentials: a header cell that names a secret (`password`,
# `api key`, `密码`), the `|---|` row under it (of two dashes or more), then rows whose
# cell in that column is the secret.  A password column's cell is a password when it is
# one word that is no placeholder, prose word, hashing scheme or mark (`-`, `yes`, `✓`);
# any other secret column's only when it looks random, so a table that documents
# tokens (`| token | meaning |`) keeps its words.  Pure string work, a line at a time.
_TABLE_WORDS = ("pass", "secret", "token", "key", "pwd", "pw", "cred", *_CJK_SECRET_WORDS)
_TABLE_HEADER = lazy(
    r"(?:[a-z0-9]{1,24}[ _-]?)?(?:pass(?:word|wd|phrase|code)?|pwd|pw|secret|token|"
    r"credentials?|(?:api|access|secret|private|app|client|license)[ _-]?key|apikey|"
    r"密码|口令|密钥|秘钥|私钥|令牌|パスワード|비밀번호)(?:[ ]?\([^()]{1,24}\))?")
_TABLE_RULE = frozenset("|-: \t")
# Marks, and the types a table of fields gives (`| type | string |`): no password.
_TABLE_MARKS = frozenset(("-", "--", "—", "–", "n/a", "na", "✓", "✔", "✗", "x", "yes", "no", "y",
                          "n", "?", "same", "ditto", "〃", "无", "空", "string", "str", "text",
                          "varchar", "char", "int", "integer", "number", "bool", "boolean",
                          "bytes", "binary", "blob", "json", "password", "secret", "any"))


def _table_cells(line: str) -> list[tuple[int, int]] | None:
    """The (start, end) of each cell of a table row, stripped (None: not a row)."""
    inner_start = len(line) - len(line.lstrip())
    inner_end = len(line.rstrip())
    if inner_end - inner_start < 3 or line.count("|") < 2:
        return None
    if line[inner_start] == "|":
        inner_start += 1
    if line[inner_end - 1] == "|":
        inner_end -= 1
    cells = []
    at = inner_start
    while True:
        bar = line.find("|", at, inner_end)
        stop = inner_end if bar < 0 else bar
        piece = line[at:stop]
        lead = len(piece) - len(piece.lstrip())
        cells.append((at + lead, at + len(piece.rstrip())))
        if bar < 0:
            return cells
        at = bar + 1


def _table_kind(name: str) -> str:
    """The kind of secret a table cell that `_TABLE_HEADER` matched names."""
    return (_kind_for_key(name.replace(" ", "_")) if name.isascii()
            else _CJK_KINDS.get(name[:2], "key"))


def _table_secret(value: str, password: bool) -> bool:
    core = value.strip("`*_")
    if (not core or core.lower() in _TABLE_MARKS or core.lower() in _PASSWORD_SCHEMES
            or _is_placeholder(core)):
        return False
    if password:
        return (" " not in core and len(core) >= 3 and core.lower() not in _STOPWORDS
                and not _prose_verb(core))
    return _looks_random(core) or _random_token(core)


def _redact_tables(text: str, findings: list[str]) -> str:
    lines = text.split("\n")
    spans: list[_Span] = []
    offsets = []
    at = 0
    for line in lines:
        offsets.append(at)
        at += len(line) + 1
    index = 1
    while index < len(lines):
        rule = lines[index]
        if "-" not in rule or "|" not in rule or not set(rule) <= _TABLE_RULE:
            index += 1
            continue
        heading = lines[index - 1]
        if rule.lstrip()[:1] == "|" and heading.lstrip()[:1] != "|" and "|" in heading:
            heading = heading[heading.index("|"):]  # after a label (`[USER] | user | …`)
        columns = []
        for number, (start, end) in enumerate(_table_cells(heading) or ()):
            name = _lower(heading[start:end]).strip("`*_ ")
            if _TABLE_HEADER.fullmatch(name):
                columns.append((number, _table_kind(name)))
        index += 1
        if not columns:
            if len(_table_cells(heading) or ()) == 2:
                index = _key_value_rows(lines, index, offsets, spans)
            continue  # the next rule line is looked for from here
        while index < len(lines):
            cells = _table_cells(lines[index])
            if cells is None:
                break
            for number, kind in columns:
                if number < len(cells):
                    start, end = cells[number]
                    value = lines[index][start:end]
                    if _table_secret(value, kind == "password"):
                        spans.append(_Span(offsets[index] + start, offsets[index] + end,
                                           marker(kind), kind))
            index += 1
    return _apply(text, spans, findings)


def _key_value_rows(lines: list[str], index: int, offsets: list[int],
                    spans: list[_Span]) -> int:
    """A two-column table of settings (`| key | value |`): a row whose first cell names
    a secret (`password`, `DB_PASSWORD`, `api key`) has it in its second.  A password
    there must hold a digit or a symbol, so that a row that describes the field
    (`| password | required |`) keeps its word.  Returns the first line after the rows."""
    while index < len(lines):
        line = lines[index]
        cells = _table_cells(line)
        if cells is None:
            break
        if len(cells) == 2:
            name = _lower(line[cells[0][0]:cells[0][1]]).strip("`*_ ")
            if _TABLE_HEADER.fullmatch(name):
                kind = _table_kind(name)
                start, end = cells[1]
                value = line[start:end]
                password = kind == "password"
                if _table_secret(value, password) and (
                        not password or not value.strip("`*_").isalpha()):
                    spans.append(_Span(offsets[index] + start, offsets[index] + end,
                                       marker(kind), kind))
        index += 1
    return index


# ─── Credential pairs ──────────────────────────────────────────────────────

# A password of a pair: printable ASCII but a space, a quote, `/`, `<` and `>` (so a
# marker or a path is none), ended by anything else but a `/` (`admin/hunter2、记得改`,
# "`login admin/hunter2`").
_PAIR_VALUE = r"[!#-&(-.0-;=?-_a-~]"
_PAIR_VALUE_END = r"(?![!#-&(-;=?-_a-~])"

# `login admin/Tr0ub4dor3`, `log in with root / hunter2`, `credentials admin/admin`: a
# login word, then USER/PASSWORD (over the lowered text; the word's own start is
# checked by `_login_pair`, so that the pattern starts with its literals).
_LOGIN_PAIR = lazy(
    r"(?:log(?:[ \t]?in|on)|sign[ \t]?in|credentials?|creds|user(?:[ \t]?name)?/pass(?:word|wd)?)"
    r"(?:[ \t]{0,4}[:=][ \t]{0,4}|[ \t]{1,4}(?:(?:with|as|is|are|was|using)[ \t]{1,4})?)"
    r"(?P<user>[a-z_][a-z0-9_.@+-]{0,63})(?:[ \t]{0,4}/[ \t]{0,4}|(?P<colon>:))"
    r"(?P<value>" + _PAIR_VALUE + "{1,256})" + _PAIR_VALUE_END)
# `user admin password hunter2`, `user: admin, password hunter2`: a user named, then a
# password word and its value (with a colon after it, it is a key=value).
_USER_PASSWORD = lazy(
    r"(?:user(?:[ \t]?name)?|login)(?:[ \t]{0,4}[:=][ \t]{0,4}|[ \t]{1,4})"
    r"(?P<user>[a-z_][a-z0-9_.@+-]{0,63})[ \t]{0,4}[,;]?[ \t]{1,4}(?:and[ \t]{1,4})?"
    r"(?:pass(?:word|wd)?|pwd|pw)[ \t]{1,4}(?P<value>[!#-&(-;=?-_a-~]{1,256})")
# `admin / Tr0ub4dor3`: no login word, a spaced slash after a word: only a value that
# can be nothing but a password (`_strong_password`), since paths, ratios and pairs of
# names (`src/main`, `1 / 2`, `TCP / IP`, `linux / Windows11`) have this shape too.
_SLASH_PAIR = lazy(r"/(?<=[ \t]/)[ \t]{1,4}(?P<value>" + _PAIR_VALUE + "{8,256})"
                   + _PAIR_VALUE_END)
_USER_CHARS = _KEY_CHARS + "@+"
_LEET = lazy(r"[a-z][0-9]{1,8}[a-z]")


def _pair_password(value: str, user: str) -> bool:
    """The password of a pair a login or password word names: the user name again
    (`admin/admin`), or 4 characters or more with a digit or a symbol (`hunter2`,
    `Tr0ub4dor3`).  Plain words (`login page/form`, `sign in with Google/GitHub`,
    `user table password column`), a flag or a reference are none."""
    if not value or value[0] == "-" or _is_placeholder(value) or value.lower() in _STOPWORDS:
        return False
    if value.lower() == user.lower():
        return True
    return len(value) >= 4 and not value.isalpha()


def _strong_password(value: str) -> bool:
    """Mixed case and a digit, 8 characters or more, and not a name: a symbol other
    than `-._`, or a digit between lowercase letters (`Tr0ub4dor3`, `P@ssw0rd`,
    `Summer2024!`).  `Windows11`, `OAuth2Client`, `S3Bucket`, `Summer2024` read as names."""
    if len(value) < 8:
        return False
    chars = set(value)
    if not (chars & _UPPER and chars & _LOWER and chars & _DIGITS):
        return False
    return (not all(c.isalnum() or c in "-._" for c in value)
            or _LEET.search(value) is not None)


def _pair_value(match: re.Match[str], text: str) -> tuple[int, int, str]:
    start, end, value = _value(match, text)
    value = value.rstrip(_TRAILING)
    return start, start + len(value), value


def _login_pair(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    begin = match.start()
    if begin and text[begin - 1] in _WORD_BEFORE:
        return None  # `blog`, `catalog`, `superuser`: not the word
    start, end, value = _pair_value(match, text)
    user = text[match.start("user"):match.end("user")]
    if not _pair_password(value, user):
        return None
    if "colon" in match.re.groupindex and match.group("colon") and not (
            value.lower() == user.lower() or _colon_password(value)):
        return None  # `login host:8080`, `credentials aws:prod-2`: a host, a profile
    return start, end, marker("password"), "password"


def _colon_password(value: str) -> bool:
    """The password of `USER:PASSWORD` in prose: `_strong_password`, or a letter, a
    digit and a symbol that names and ports never hold (`hunter22!`, `s3cr3t#`)."""
    if _strong_password(value):
        return True
    return (any(c.isalpha() for c in value) and any(c in _DIGITS for c in value)
            and any(c in "!#$%&*+=?^~" for c in value))


# `admin:Tr0ub4dor&3`, `root:Hunter2!x`: an administrator's name, a colon and a value
# that is nothing but a password (`_colon_password`); `admin:read`, `root:x:0:0:…` and
# `system:admin:dev` keep theirs.
_ADMIN_PAIR = lazy(r"(?P<user>admin(?:istrator)?|root|superuser|sysadmin)(?<![\w:/.@-]admin)"
                   r"(?<![\w:/.@-]administrator)(?<![\w:/.@-]root)(?<![\w:/.@-]superuser)"
                   r"(?<![\w:/.@-]sysadmin):(?P<value>" + _PAIR_VALUE + "{6,256})"
                   + _PAIR_VALUE_END)


def _admin_pair(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    start, end, value = _pair_value(match, text)
    if ":" in value or not _colon_password(value) or _is_placeholder(value):
        return None
    return start, end, marker("password"), "password"


# "the wifi pass is hunter22!": `pass` names a password only after a word that says
# whose (a network, an account), and only for a value with a letter and a digit ("the
# second pass is 2x slower", "the boarding pass is ready" are prose).
_PASS_IS = lazy(r"pass(?<=[ \t]pass)[ \t]{1,4}(?:is|was)[ \t]{1,4}(?:now[ \t]{1,4})?"
                r"(?P<value>[^\s\"'`<>]{1,256})")
_PASS_WHOSE = frozenset("""
wifi wi-fi wlan router network guest login admin root user account ssh vpn db database server
my our
""".split())  # noqa: SIM905 - a word list reads better as text


def _pass_is(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    before = text[max(0, match.start() - 24):match.start()].split()
    if not before or before[-1].lower() not in _PASS_WHOSE:
        return None
    start, end, value = _pair_value(match, text)
    if len(value) < 6 or not (any(c.isalpha() for c in value) and any(c in _DIGITS for c in value)):
        return None
    if _is_placeholder(value):
        return None
    return start, end, marker("password"), "password"


def _slash_pair(match: re.Match[str], text: str) -> tuple[int, int, str, str] | None:
    start, end, value = _pair_value(match, text)
    if not _strong_password(value) or _is_placeholder(value):
        return None
    before = text[max(0, match.start() - 72):match.start()].rstrip(" \t")
    lead = before.rstrip(_USER_CHARS)
    user = before[len(lead):]
    if not user or not user[0].isalpha() or len(user) > 64 or lead.rstrip(" \t")[-1:] == "/":
        return None  # no word before the slash, or a chain (`docs / api / V2…`)
    return start, end, marker("password"), "password"


def _redact_pairs(text: str, findings: list[str]) -> str:
    lowered = _lower(text)  # the keywords are looked for once: a marker adds none they need
    slash = "/" in text
    for pattern, replace, wanted in (
            (_LOGIN_PAIR, _login_pair,
             (slash or ":" in text)
             and any(word in lowered for word in ("log", "sign", "cred", "user"))),
            (_SLASH_PAIR, _slash_pair, " /" in text or "\t/" in text),
            (_USER_PASSWORD, _login_pair, ("user" in lowered or "login" in lowered)
             and ("pass" in lowered or "pw" in lowered)),
            (_ADMIN_PAIR, _admin_pair, "admin:" in lowered or "root:" in lowered
             or "administrator:" in lowered or "superuser:" in lowered),
            (_PASS_IS, _pass_is, "pass is" in lowered or "pass was" in lowered
             or " pass " in lowered and (" is " in lowered or " was " in lowered))):
        if wanted:
            redacted = _sub(pattern, text, findings, replace, lowered)
            if redacted is not text:
                text, lowered = redacted, _lower(redacted)
    return text


# ─── The safety net: upstream's own secret patterns ────────────────────────

# Mnemosyne 3.15.1's SECRET_LABELED_PATTERNS, each vetted here and run as a
# linear equivalent over the lowered text (the same matches as upstream's
# case-insensitive regex over the original).  A test compares this with the
# installed upstream, so an upgrade that changes them fails until reviewed.
UPSTREAM_PATTERNS_VETTED: tuple[tuple[str, str], ...] = (
    ("api_key_prefix", r"(?:sk|pk|rk)-[a-zA-Z0-9]{20,}"),
    ("aws_access_key", r"AKIA[0-9A-Z]{16}"),
    ("github_token", r"gh[pousr]_[A-Za-z0-9]{36}"),
    ("slack_token", r"xox[baprs]-[A-Za-z0-9-]+"),
    ("google_api_key", r"AIza[0-9A-Za-z_\-]{35}"),
    ("jwt_token", r"eyJ[A-Za-z0-9_\-]+\.eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+"),
    ("secret_assignment", r"(?i)(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key)"
                          r"\s*[=:]\s*['\"]?[^\s'\"<>{}]{8,}"),
    ("private_key_block", r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP )?PRIVATE KEY-----"),
    ("connection_string_with_credentials", r"(?:postgres|mysql|mongodb|redis)://[^:]+:[^@]+@"),
    ("env_secret_assignment", r"(?i)^\s*(?:DB_PASS|SECRET_KEY|AUTH_TOKEN|API_SECRET)\s*="),
)
_VETTED = dict(UPSTREAM_PATTERNS_VETTED)
# Lowercase, case-sensitive forms for the lowered text, with the literal each needs.
_NET_PATTERNS: dict[str, tuple[str, re.Pattern[str]]] = {
    "api_key_prefix": ("k-", lazy(r"(?:sk|pk|rk)-[a-z0-9]{20,}")),
    "aws_access_key": ("akia", lazy(r"akia[0-9a-z]{16}")),
    "github_token": ("gh", lazy(r"gh[pousr]_[a-z0-9]{36}")),
    "slack_token": ("xox", lazy(r"xox[baprs]-[a-z0-9-]+")),
    "google_api_key": ("aiza", lazy(r"aiza[0-9a-z_\-]{35}")),
    "secret_assignment": ("", lazy(
        r"(?P<head>(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key)"
        r"\s*[=:]\s*['\"]?)[^\s'\"<>{}]{8,}")),
    "private_key_block": ("-----begin", lazy(
        r"-----begin (?:rsa |ec |dsa |openssh |pgp )?private key-----")),
}
_ASSIGNMENT_WORDS = ("password", "passwd", "pwd", "secret", "token", "key")
_NET_KIND = {"api_key_prefix": "api-key", "aws_access_key": "aws-access-key",
             "github_token": "github-token", "slack_token": "slack-token",
             "google_api_key": "google-api-key", "jwt_token": "jwt",
             "secret_assignment": "secret", "private_key_block": "private-key",
             "connection_string_with_credentials": "password"}
# For an unvetted upstream pattern (a newer upstream), the longest text it is
# run on: its cost is unknown.
UNVETTED_MAX_CHARS = 32_768
_UPSTREAM_SCHEME = lazy(r"(?:postgres|mysql|mongodb|redis)://")
_ENV_RULE = lazy(r"\A(?P<head>\s*(?:db_pass|secret_key|auth_token|api_secret))\s*=")

_upstream_cache: list[tuple[str, re.Pattern[str] | None]] | None = None


def _upstream() -> list[tuple[str, re.Pattern[str] | None]]:
    """(label, compiled) of upstream's secret patterns (vendored if absent).

    Only an unvetted pattern is compiled (None for the vetted ones: they run as
    the linear-time equivalents above, never as upstream wrote them).
    """
    global _upstream_cache
    if _upstream_cache is None:
        try:
            pairs = [(str(label), str(source)) for label, source in _upstream_patterns()]
        except Exception:  # noqa: BLE001 - upstream missing or changed shape
            pairs = list(UPSTREAM_PATTERNS_VETTED)
        compiled: list[tuple[str, re.Pattern[str] | None]] = []
        for label, source in pairs:
            if _VETTED.get(label) == source:
                compiled.append((label, None))
                continue
            try:
                compiled.append((label, re.compile(source, re.IGNORECASE)))
            except re.error:
                continue  # upstream skips patterns that do not compile too
        _upstream_cache = compiled
    return _upstream_cache


def _upstream_patterns() -> Any:
    """Upstream's `SECRET_LABELED_PATTERNS`.

    Its `filters` module needs only the standard library, but importing it runs
    the `mnemosyne.core` package first (plugins, streaming: about 8 ms of a
    hook's cold start, for a list of strings).  So, unless upstream is loaded
    already, the list an earlier process read is taken from its cache file
    (`_kept_patterns`); failing that, the module's file is run on its own
    (its own imports, `dataclasses` and `logging`, cost a hook about 6 ms) and
    the list kept for the next process; if that fails (a newer upstream that
    needs its package), it is imported the ordinary way.
    """
    module = sys.modules.get("mnemosyne.core.filters")
    if module is None:
        kept = _kept_patterns()
        if kept is not None:
            return kept
        try:
            module = _filters_alone()
        except Exception:  # noqa: BLE001 - any failure: the ordinary import below
            module = None
        if module is not None and hasattr(module, "SECRET_LABELED_PATTERNS"):
            _keep_patterns(module)
    if module is None or not hasattr(module, "SECRET_LABELED_PATTERNS"):
        from .upstream_import import quiet_upstream_import

        with quiet_upstream_import():  # not its `import mcp`: it costs seconds
            import mnemosyne.core.filters as module
    return module.SECRET_LABELED_PATTERNS


# The patterns as the last process read them from upstream's `filters.py`, with
# that file's path, size and mtime: a process takes them only while the file is
# the same.  One file per Python environment (`sys.prefix`), so two that share a
# data dir keep their own.  A cache (`fsutil.read_json_cache`): any doubt (no
# file, another shape, a changed or missing source) reads the source again.
PATTERNS_CACHE = "upstream-secret-patterns"
_PATTERNS_VERSION = 1


def _patterns_cache_path() -> Any:
    from ..fsutil import fnv64
    from ..paths import data_dir

    environment = fnv64(sys.prefix.encode("utf-8", "surrogatepass"))
    return data_dir() / "cache" / f"{PATTERNS_CACHE}-{environment:016x}.json"


def _source_stamp(path: str) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns]


def _kept_patterns() -> list[tuple[str, str]] | None:
    from ..fsutil import read_json_cache

    kept = read_json_cache(_patterns_cache_path(),
                           {"version": _PATTERNS_VERSION, "prefix": sys.prefix}, limit=1 << 20)
    if kept is None or not isinstance(kept.get("source"), str) \
            or kept.get("stamp") != _source_stamp(kept["source"]):
        return None
    patterns = kept.get("patterns")
    if not isinstance(patterns, list):
        return None
    pairs = [(p[0], p[1]) for p in patterns if isinstance(p, list) and len(p) == 2
             and isinstance(p[0], str) and isinstance(p[1], str)]
    return pairs if len(pairs) == len(patterns) else None


def _keep_patterns(module: Any) -> None:
    from ..fsutil import keep_json_cache

    source = getattr(module, "__file__", None)
    stamp = _source_stamp(source) if isinstance(source, str) else None
    if stamp is None:
        return
    try:
        patterns = [[str(label), str(pattern)] for label, pattern in
                    module.SECRET_LABELED_PATTERNS]
    except (TypeError, ValueError):
        return  # not pairs: the next process reads the source again
    keep_json_cache(_patterns_cache_path(), {"version": _PATTERNS_VERSION,
                                             "prefix": sys.prefix, "source": source,
                                             "stamp": stamp, "patterns": patterns})


def _filters_alone() -> Any:
    import importlib.util

    package = importlib.util.find_spec("mnemosyne")  # finds it; does not run it
    if package is None or not package.submodule_search_locations:
        return None
    for folder in package.submodule_search_locations:
        path = os.path.join(folder, "core", "filters.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_mnemo_upstream_filters", path)
            if spec is None or spec.loader is None:
                return None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # its dataclasses look themselves up there
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[spec.name]
                raise
            return module
    return None


def _url_rule_spans(lowered: str) -> Iterator[tuple[int, int, int]]:
    """Upstream's `(postgres|mysql|mongodb|redis)://[^:]+:[^@]+@`, in linear time.

    Yields (scheme start, first colon, the `@`) of each match.  For one
    scheme occurrence the rule's meaning is fixed: the first colon after
    `://` (at least one character later), then the first `@` after it (at
    least one character later).  The `@` search reuses the last result, so
    the whole text is scanned once.
    """
    at = -1
    floor = 0
    for scheme in _UPSTREAM_SCHEME.finditer(lowered):
        if scheme.start() < floor:
            continue
        after = scheme.end()
        colon = lowered.find(":", after)
        if colon <= after:
            continue
        if at <= colon + 1:
            at = lowered.find("@", colon + 2)
        if at < 0:
            return
        if lowered[colon + 1] == "@":
            continue
        yield scheme.start(), colon, at
        floor = at + 1


def _net_spans(label: str, text: str, lowered: str) -> list[_Span] | None:
    """The spans to redact for one vetted upstream label (None: not a span label)."""
    kind = _NET_KIND.get(label, "secret")
    if label == "jwt_token":
        if ".eyj" not in lowered:
            return []
        return [_Span(s, e, marker(kind), kind) for s, e in _jwt_spans(lowered)]
    if label == "connection_string_with_credentials":
        if "://" not in lowered:
            return []
        spans = []
        for start, colon, at in _url_rule_spans(lowered):
            if (any(c.isspace() for c in text[start:at]) or "/" in text[colon:at]
                    or at - colon > 257):
                continue  # not a credential: see the module docstring
            spans.append(_Span(lowered.index("://", start) + 3, at, ":" + marker(kind), kind))
        return spans
    if label not in _NET_PATTERNS:
        return None
    needle, pattern = _NET_PATTERNS[label]
    if label == "secret_assignment":
        if not any(word in lowered for word in _ASSIGNMENT_WORDS):
            return []
        return [_Span(m.end("head"), m.end(), marker(kind), kind)
                for m in pattern.finditer(lowered)]
    if needle not in lowered:
        return []
    if label == "private_key_block":
        spans = []
        for m in pattern.finditer(lowered):
            end = _PEM_END.search(lowered, m.end())
            spans.append(_Span(m.start(), end.end() if end else len(text), marker(kind), kind))
        return spans
    return [_Span(m.start(), m.end(), marker(kind), kind) for m in pattern.finditer(lowered)]


def upstream_findings(text: str) -> list[str]:
    """The labels upstream's `detect_secrets` would report for `text`, in linear time."""
    labels = []
    lowered = _lower(text)
    for label, compiled in _upstream():
        if compiled is not None:  # unvetted: upstream's own pattern, on a bounded text
            hit = len(text) <= UNVETTED_MAX_CHARS and compiled.search(text) is not None
        elif label == "env_secret_assignment":
            hit = _ENV_RULE.match(lowered) is not None
        else:
            hit = bool(_net_spans(label, text, lowered)) or (
                label == "connection_string_with_credentials"
                and next(_url_rule_spans(lowered), None) is not None)
        if hit:
            labels.append(label)
    return labels


def _net(text: str, findings: list[str]) -> str:
    """Redact whatever upstream's secret patterns still match (see the module docstring)."""
    for label, compiled in _upstream():
        if compiled is not None:  # unvetted: upstream's own pattern, on a bounded text
            if len(text) <= UNVETTED_MAX_CHARS:
                spans = [_Span(m.start(), m.end(), marker("secret"), "secret")
                         for m in compiled.finditer(text) if m.end() > m.start()]
                text = _apply(text, spans, findings)
            continue
        lowered = _lower(text)
        if label == "env_secret_assignment":
            env = _ENV_RULE.match(lowered)
            if env is not None:  # the rule matches the key alone: rewrite the `=`
                text = text[:env.end("head")] + ": " + text[env.end():].lstrip(" \t")
            continue
        spans = _net_spans(label, text, lowered)
        if spans:
            text = _apply(text, spans, findings)
    return text


# ─── Entry points ──────────────────────────────────────────────────────────

def find_and_redact(text: str) -> ScrubResult:
    """Replace every secret found in `text` by its marker; report the kinds found.

    `text` is first cleaned with `clean_invisible`, so a secret split by a
    zero-width character is still found.  Idempotent: scrubbing the result
    again changes nothing.  Linear time.
    """
    findings: list[str] = []
    text = clean_invisible(text)
    if text.isascii() or _WIDE.search(text) is None:
        text = _redact(text, findings)
    else:
        text = _redact_wide(text, findings)
    return ScrubResult(text=text, findings=findings)


def _redact(text: str, findings: list[str]) -> str:
    text = _redact_blocks(text, findings)
    text = _redact_wrapped(text, findings)
    text = _redact_tokens(text, findings)
    text = _redact_cut(text, findings)
    text = _redact_urls(text, findings)
    text = _redact_auth(text, findings)
    text = _redact_key_values(text, findings)
    text = _redact_named(text, findings)
    text = _redact_flags(text, findings)
    text = _redact_markup(text, findings)
    text = _redact_held(text, findings)
    text = _redact_phrases(text, findings)
    text = _redact_pairs(text, findings)
    return _net(text, findings)


# Full-width forms (U+FF01-FF5E), the ideographic space, comma and full stop, as a
# Chinese, Japanese or Korean input method types them: `password：hunter2`,
# `API_KEY＝sk-…`, `ＰＡＳＳＷＯＲＤ＝…`, `password=hunter2、记得改`.  Each maps to one
# character, so positions carry over.  The ideographic space and the full-width
# parentheses read as a space (`密码（Password）：…`).  The full-width comma,
# semicolon, `!` and `?`, and the ideographic comma and full stop, read as
# `_CLAUSE_MARK`: a space to the patterns, and the end of a clause, so they end a
# value (`密码：abc123，token=…` holds two; an ASCII comma would not end every one),
# a config line's value too (`password: hunter2，明天换掉`).
_WIDE = lazy("[\uff01-\uff5e\u3000-\u3002]")
_WIDE_SPACES = (0x3000, 0xFF08, 0xFF09)
_WIDE_BREAKS = (0xFF01, 0xFF0C, 0xFF1B, 0xFF1F, 0x3001, 0x3002)
_WIDE_TO_ASCII = {**{code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)},
                  **dict.fromkeys(_WIDE_SPACES, 0x20),
                  **dict.fromkeys(_WIDE_BREAKS, ord(_CLAUSE_MARK))}


def _redact_wide(text: str, findings: list[str]) -> str:
    """Redact `text` as read with its full-width forms in ASCII, keeping its own characters.

    The patterns run once, over the ASCII reading.  A line they left alone is
    kept as it was; in a line they changed, only the stretch from the first
    change to the last is taken from the redacted reading, so `密码：…，别外传`
    keeps its full-width colon and comma around `<redacted-password>`.
    """
    found, folded, redacted = _ascii_reading(text)
    if redacted == folded:
        return text
    if redacted.count("\n") != text.count("\n"):
        # A block spanning lines went (a private key): take such blocks out in the
        # text's own reading first, then read what is left again.
        text = _redact(text, findings)
        found, folded, redacted = _ascii_reading(text)
        if redacted.count("\n") != text.count("\n"):
            findings.extend(found)
            return redacted.replace(_CLAUSE_MARK, " ")
    findings.extend(found)
    out = []
    for line, before, after in zip(text.split("\n"), folded.split("\n"), redacted.split("\n"),
                                   strict=True):
        if after == before:
            out.append(line)
            continue
        head = _common_prefix(before, after)
        tail = min(_common_prefix(before[::-1], after[::-1]),
                   min(len(before), len(after)) - head)
        out.append(line[:head]
                   + _write_back(line[head:len(line) - tail], before[head:len(before) - tail],
                                 after[head:len(after) - tail])
                   + line[len(line) - tail:])
    return "\n".join(out)


_MARKER_SPLIT = lazy(r"(<redacted-[a-z0-9-]{1,32}>)")


def _write_back(original: str, before: str, after: str) -> str:
    """`after`, the redacted ASCII reading of `before`, in `original`'s own characters.

    Between the markers, what the patterns kept of `before` is found there, in
    order, and written as `original` has it (`，ｔｏｋｅｎ＝` stays full-width between
    two redactions).  A piece not found (a rewritten separator) goes as read,
    its clause marks as spaces.
    """
    out: list[str] = []
    cursor = 0
    for piece in _MARKER_SPLIT.split(after):
        if not piece or piece.startswith(MARKER_PREFIX):
            out.append(piece)
            continue
        at = before.find(piece, cursor)
        if at < 0:
            out.append(piece.replace(_CLAUSE_MARK, " "))
            continue
        out.append(original[at:at + len(piece)])
        cursor = at + len(piece)
    return "".join(out)


def _ascii_reading(text: str) -> tuple[list[str], str, str]:
    """What the patterns find in `text` read in ASCII, that reading, and it redacted."""
    found: list[str] = []
    folded = text.translate(_WIDE_TO_ASCII)
    return found, folded, _redact(folded, found)


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix (slices compared in C, O(n log n))."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def scrub(text: str, policy: str = "redact") -> ScrubResult:
    """Apply `scrub.policy`: `redact` replaces, `warn` only reports, `off` does nothing.

    Under `redact` the returned text is also cleaned of invisible characters
    (`clean_invisible`); under `warn` and `off` it is `text` unchanged, so
    callers run `clean_invisible` themselves on every write path.
    """
    if policy == "off":
        return ScrubResult(text=text)
    result = find_and_redact(text)
    if policy == "warn":
        return ScrubResult(text=text, findings=result.findings)
    return result
