"""Patterns compiled on first use (`lazy_re`), and the ASCII shortcuts beside them:
the same answers as the patterns compiled up front."""

from __future__ import annotations

import re

from dsh_mnemo.hook import gate, strip
from dsh_mnemo.lazy_re import LazyPattern, lazy
from dsh_mnemo.memory import scrub


def test_a_lazy_pattern_compiles_on_first_use_and_answers_like_re() -> None:
    source = r"(?P<word>[\u4e00-\u9fff]+)|\d+"
    pattern = lazy(source, re.I)
    assert isinstance(pattern, LazyPattern) and pattern._compiled is None
    text = "build 42 部署 then 7"
    real = re.compile(source, re.I)
    assert pattern.findall(text) == real.findall(text)
    assert pattern._compiled is not None
    assert pattern.sub("#", text) == real.sub("#", text)
    assert pattern.search(text).span() == real.search(text).span()
    assert [m.group(0) for m in pattern.finditer(text)] == ["42", "部署", "7"]
    assert pattern.fullmatch("部署") is not None and pattern.pattern == source
    assert pattern.flags == real.flags


def test_ascii_text_is_cleaned_exactly_as_by_the_whole_class() -> None:
    whole = scrub._INVISIBLE_OR_CONTROL.compiled()
    every = "".join(chr(c) for c in range(128))
    for text in (every, "plain prompt\twith tab\nand\x00nul\x1b[31mred\x7f",
                 "\r\nwindows\rline", ""):
        assert text.isascii()
        expected = whole.sub("", scrub._LINE_BREAKS.sub("\n", text))
        assert scrub.clean_invisible(text) == expected
        assert scrub.strip_invisible(text) == scrub._INVISIBLE.compiled().sub("", text)
    # past ASCII the whole class still applies
    assert scrub.clean_invisible("a\u200bb\u2028c\x85d\u2800e") == "ab\ncd e"
    assert scrub.strip_invisible("a\u200bb\ufeffc\x07") == "abc\x07"


def test_cjk_detection_and_terms_with_and_without_cjk() -> None:
    assert not gate.has_cjk("how do we deploy?")
    assert gate.has_cjk("怎么部署") and gate.has_cjk("デプロイ") and gate.has_cjk("배포")
    assert not gate.has_cjk("café naïve")  # non-ASCII, not CJK
    assert gate.terms("部署流程") >= {"部署", "署流", "流程"}
    assert "deploy" in gate.terms("deploy 部署")
    assert gate.distinctive("怎么部署到生产环境") and not gate.distinctive("好的，谢谢")
    assert gate.distinctive("deploy to prod") and not gate.distinctive("ok thanks")
    assert gate.is_user_request("[USER] 我们怎么部署吗") and \
        not gate.is_user_request("[USER] We deploy with make release.")


def test_a_tag_is_still_cut_from_a_prompt() -> None:
    text = "before <memory-data>\n- (fact) x\n</memory-data> after"
    assert strip.strip_injected(text) == "before  after"
    assert strip.strip_injected("no tags at all") == "no tags at all"


def test_a_plain_prompt_compiles_only_the_few_patterns_every_text_needs() -> None:
    """A hook process scrubs the prompt before it spools it: the patterns of secrets
    the prompt does not hint at (no `://`, no `-----BEGIN`, no `eyJ`...) are never
    compiled (about 40 of them: 8 ms of regex compiling in a cold hook process)."""
    import json
    import subprocess
    import sys

    code = (
        "import json\n"
        "from dsh_mnemo.lazy_re import LazyPattern\n"
        "from dsh_mnemo.memory import scrub\n"
        "every = {n for n, v in vars(scrub).items() if isinstance(v, LazyPattern)}\n"
        "text = scrub.scrub('how do we deploy the checkout service? it failed with exit "
        "code 2 after make release', 'redact').text\n"
        "done = sorted(n for n in every if vars(scrub)[n]._compiled is not None)\n"
        "print(json.dumps([len(every), done, text]))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    total, compiled, text = json.loads(result.stdout)
    assert text.startswith("how do we deploy") and "<redacted" not in text
    assert total >= 30
    assert set(compiled) <= {"_ASCII_CONTROL", "_LINE_BREAKS", "_AWS_SECRET_LOWERED",
                             "_ENV_RULE"}
