"""Standing memories: once per session, in their own block, never leaking, never in a slot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_mnemo.harnesses.registry import HARNESSES
from tests.conftest import bind_repo, configure
from tests.hook.conftest import (
    injected_text,
    payload,
    run_cli_hook,
    run_inprocess,
    user_rows,
)
from tests.memory.conftest import mnemo

RULE = "Always ask before running a destructive command such as dropping a database."
CHANGELOG = "Release notes follow Keep a Changelog."
GLOBAL = "The user is Dana, a backend engineer who prefers short answers."
INJECTING = [h for h, spec in HARNESSES.items() if spec.can_inject]
WITH_SESSION_START = [h for h in INJECTING if "session-start" in HARNESSES[h].installed_events]


def standing(text: str, cwd: Path, *extra: str) -> str:
    result = mnemo("remember", "--standing", *extra, text, "--json", cwd=cwd)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["standing"] is True
    return document["id"]


@pytest.fixture
def two(make_repo):
    configure()
    alpha = bind_repo(make_repo("alpha")).path
    beta = bind_repo(make_repo("beta")).path
    standing(RULE, alpha)
    standing(CHANGELOG, alpha)
    standing(GLOBAL, alpha, "--scope", "global")
    mnemo("remember", "We deploy with make release from main.", cwd=alpha)
    return alpha, beta


def fence_of(text: str) -> list[str]:
    return [block for block in text.split("</memory-data>") if 'kind="standing"' in block]


@pytest.mark.parametrize("harness", WITH_SESSION_START)
def test_session_start_gives_the_standing_block_through_the_real_hook(harness: str, two
                                                                       ) -> None:
    alpha, _ = two
    done = run_cli_hook("session-start", harness, payload(harness, "session-start", cwd=alpha,
                                                          session="s1"))
    assert done.returncode == 0 and done.stderr == ""
    if HARNESSES[harness].output == "text":
        text = done.stdout
    else:
        document = json.loads(done.stdout)
        assert document["hookSpecificOutput"]["hookEventName"] == \
            HARNESSES[harness].event_names["session-start"]
        text = document["hookSpecificOutput"]["additionalContext"]
    if HARNESSES[harness].escapes_context:
        text = text.replace("&amp;", "&")
    (block,) = fence_of(text)
    for memory in (RULE, CHANGELOG, GLOBAL):
        assert memory in block
    assert "make release" not in text  # recalled memories are not standing ones
    # the session's prompts then carry only what they recall: no second standing block
    prompt = run_inprocess("prompt", harness, payload(harness, "prompt", cwd=alpha,
                                                      session="s1",
                                                      prompt="drop the old staging database"))
    assert not fence_of(injected_text(harness, prompt))


@pytest.mark.parametrize("harness", INJECTING)
def test_without_a_session_start_the_first_prompt_carries_it_once(harness: str, two) -> None:
    alpha, _ = two
    first = injected_text(harness, run_inprocess("prompt", harness, payload(
        harness, "prompt", cwd=alpha, session="s2", prompt="write the release notes")))
    (block,) = fence_of(first)
    assert CHANGELOG in block and GLOBAL in block
    second = injected_text(harness, run_inprocess("prompt", harness, payload(
        harness, "prompt", cwd=alpha, session="s2", prompt="and the changelog for 2.1?")))
    assert not fence_of(second)
    # a new session gets it again
    third = injected_text(harness, run_inprocess("prompt", harness, payload(
        harness, "prompt", cwd=alpha, session="s3", prompt="hello there, what next")))
    assert fence_of(third)


def test_no_leak_between_workspaces_and_global_ones_everywhere(two, make_repo) -> None:
    alpha, beta = two
    loose = make_repo("loose")  # not bound: only global standing memories apply
    for cwd, session in ((beta, "b1"), (loose, "l1")):
        text = injected_text("claude-code", run_inprocess("prompt", "claude-code", payload(
            "claude-code", "prompt", cwd=cwd, session=session, prompt="what should I do now")))
        (block,) = fence_of(text)
        assert GLOBAL in block and RULE not in block and CHANGELOG not in block


def test_the_budget_cuts_whole_memories_most_important_first(make_repo) -> None:
    configure(standing__budget_chars=300)
    repo = bind_repo(make_repo("app")).path
    standing("Minor: prefer tabs in Makefiles only.", repo, "--importance", "0.2")
    standing(RULE, repo, "--importance", "0.95")
    standing("Commit messages follow Conventional Commits, always with a scope.", repo,
             "--importance", "0.6")
    text = injected_text("codex", run_inprocess("session-start", "codex", payload(
        "codex", "session-start", cwd=repo, session="s1")), "session-start")
    (block,) = fence_of(text)
    assert len(block + "</memory-data>") <= 300
    lines = block.splitlines()[2:]
    # the most important first; the one that does not fit is left out whole (a
    # shorter, less important one may still fill the room left)
    assert lines[0] == f"- (workspace) {RULE}"
    assert "Conventional Commits" not in block
    for line in lines:  # every memory line is whole
        assert line.startswith("- (workspace) ") and line.endswith(".")


def test_a_compaction_gives_it_again_and_continuations_never_do(two) -> None:
    alpha, _ = two
    first = run_inprocess("session-start", "claude-code", payload(
        "claude-code", "session-start", cwd=alpha, session="c1"))
    assert fence_of(injected_text("claude-code", first, "session-start"))
    resumed = payload("claude-code", "session-start", cwd=alpha, session="c1")
    resumed["source"] = "resume"
    assert run_inprocess("session-start", "claude-code", resumed) == ""
    compacted = dict(resumed, source="compact")
    assert fence_of(injected_text("claude-code", run_inprocess(
        "session-start", "claude-code", compacted), "session-start"))
    # Qwen's tool continuations (an empty prompt) neither capture nor inject
    qwen = payload("qwen", "prompt", cwd=alpha, session="q1", prompt="")
    assert run_inprocess("prompt", "qwen", qwen) == ""


def test_a_session_that_moves_to_another_repository_gets_that_ones_block_once(two) -> None:
    alpha, beta = two
    beta_rule = "In beta, every migration is reviewed by the data team first."
    standing(beta_rule, beta)
    start = run_inprocess("session-start", "claude-code", payload(
        "claude-code", "session-start", cwd=alpha, session="m1"))
    (block,) = fence_of(injected_text("claude-code", start, "session-start"))
    assert RULE in block and beta_rule not in block

    def ask(cwd: Path, prompt: str) -> list[str]:
        return fence_of(injected_text("claude-code", run_inprocess("prompt", "claude-code",
                        payload("claude-code", "prompt", cwd=cwd, session="m1",
                                prompt=prompt))))

    # The same session id, now in beta (the agent cd'd there): beta's rules, once.
    (moved,) = ask(beta, "what should I do now")
    assert beta_rule in moved and RULE not in moved
    assert not ask(beta, "and after that?")
    assert not ask(alpha, "back here, anything else?")  # alpha's block is still in context
    # A resume in beta repeats nothing; a compaction loses every block: the
    # workspace the session is in gets its own again.
    resumed = payload("claude-code", "session-start", cwd=beta, session="m1")
    assert run_inprocess("session-start", "claude-code", dict(resumed, source="resume")) == ""
    (again,) = fence_of(injected_text("claude-code", run_inprocess(
        "session-start", "claude-code", dict(resumed, source="compact")), "session-start"))
    assert beta_rule in again
    (alpha_again,) = ask(alpha, "back in alpha after the compaction")
    assert RULE in alpha_again


def test_in_session_mode_a_moving_session_gets_each_workspaces_block_too(two) -> None:
    alpha, beta = two
    configure(recall_mode="session", auto_write_scope="session")
    beta_rule = "In beta, every migration is reviewed by the data team first."
    standing(beta_rule, beta)

    def ask(cwd: Path) -> list[str]:
        return fence_of(injected_text("claude-code", run_inprocess("prompt", "claude-code",
                        payload("claude-code", "prompt", cwd=cwd, session="m2",
                                prompt="what should I do now"))))

    (first,) = ask(alpha)
    assert RULE in first
    (moved,) = ask(beta)
    assert beta_rule in moved and RULE not in moved


def test_standing_list_and_remove(two) -> None:
    alpha, beta = two
    listed = json.loads(mnemo("standing", "list", "--json", cwd=alpha).stdout)
    texts = [s["content"] for s in listed["standing"]]
    # the order a session start gives them: equal importance, so the newest first
    assert texts == [GLOBAL, CHANGELOG, RULE]
    assert all(s["at_session_start"] is True for s in listed["standing"])
    assert [s["content"] for s in json.loads(
        mnemo("standing", "--json", cwd=beta).stdout)["standing"]] == [GLOBAL]
    rule = next(s["id"] for s in listed["standing"] if s["content"] == RULE)
    refused = mnemo("standing", "remove", rule, cwd=beta)
    assert refused.exit_code == 5  # not beta's
    assert mnemo("standing", "remove", rule, cwd=alpha).exit_code == 0
    assert RULE not in mnemo("standing", cwd=alpha).stdout


def test_an_id_may_be_given_by_its_first_characters_when_they_name_one(two) -> None:
    alpha, _beta = two
    listed = json.loads(mnemo("standing", "list", "--json", cwd=alpha).stdout)["standing"]
    rule = next(s["id"] for s in listed if s["content"] == RULE)
    others = [s["id"] for s in listed if s["id"] != rule]
    short = rule[:3]
    refused = mnemo("standing", "remove", short, cwd=alpha)
    assert refused.exit_code == 2 and f"{short} is too short for an id prefix" in refused.output
    # the shortest prefix of at least 4 characters that no other id shares
    prefix = next(rule[:n] for n in range(4, len(rule) + 1)
                  if not any(o.startswith(rule[:n]) for o in others))
    removed = json.loads(mnemo("standing", "remove", prefix, "--json", cwd=alpha).stdout)
    assert removed["id"] == rule
    assert RULE not in mnemo("standing", cwd=alpha).stdout


def test_a_prefix_shared_by_two_ids_is_refused_and_deletes_nothing() -> None:
    from dsh_mnemo.errors import RefusedError
    from dsh_mnemo.memory.store import resolve_id

    ids = ["c27d567e4e865ddb", "c27d99aa00112233", "1ec92c9dd76ca3a0"]
    assert resolve_id(" c27d567e4e865ddb ", ids, "candidate", "here", "") == ids[0]
    assert resolve_id("c27d5", ids, "candidate", "here", "") == ids[0]
    assert resolve_id("1ec9", ids, "candidate", "here", "") == ids[2]
    with pytest.raises(RefusedError, match="c27d starts 2 candidate ids here"):
        resolve_id("c27d", ids, "candidate", "here", "")
    with pytest.raises(RefusedError, match="no candidate 1ec here"):
        resolve_id("1ec", ids, "candidate", "here", "")


def test_candidates_are_suggested_accepted_and_rejected(make_repo, data_dir: Path) -> None:
    configure(capture__standing="suggest")
    repo = bind_repo(make_repo("app")).path
    for i, prompt in enumerate(("From now on we use Postgres 16, not MySQL.",
                                "以后所有接口都返回统一的错误码格式",
                                "how do we deploy this?",
                                "Always answer in English, even when I write in French.")):
        run_inprocess("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                       session=f"k{i}", prompt=prompt))
        run_inprocess("turn-end", "claude-code", payload("claude-code", "turn-end", cwd=repo,
                                                         session=f"k{i}", reply="Noted."))
    assert len(user_rows(data_dir)) == 4  # every turn is still captured as usual
    listed = json.loads(mnemo("candidates", "--json", cwd=repo).stdout)["candidates"]
    assert [c["text"] for c in listed] == [
        "From now on we use Postgres 16, not MySQL.", "以后所有接口都返回统一的错误码格式",
        "Always answer in English, even when I write in French."]
    postgres, chinese, english = (c["id"] for c in listed)
    accepted = json.loads(mnemo("candidates", "accept", english, "--scope", "global",
                                "--json", cwd=repo).stdout)
    assert accepted["standing"] is True and accepted["level"] == "global"
    assert mnemo("candidates", "reject", postgres[:8], cwd=repo).exit_code == 0
    # a rejected statement is never suggested again, even when said again
    run_inprocess("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                   session="k9",
                                                   prompt="From now on we use Postgres 16, "
                                                          "not MySQL."))
    run_inprocess("turn-end", "claude-code", payload("claude-code", "turn-end", cwd=repo,
                                                     session="k9", reply="Ok."))
    pending = json.loads(mnemo("candidates", "--json", cwd=repo).stdout)["candidates"]
    assert [c["id"] for c in pending] == [chinese]
    assert "Always answer in English" in mnemo("standing", cwd=repo).stdout


def test_standing_list_shows_what_a_session_start_has_no_room_for(two) -> None:
    alpha, _ = two
    configure(standing__budget_chars=300)  # room for the two newest only
    done = run_cli_hook("session-start", "claude-code",
                        payload("claude-code", "session-start", cwd=alpha, session="b1"))
    block = injected_text("claude-code", done.stdout, "session-start")
    result = mnemo("standing", "list", "--json", cwd=alpha)
    listed = json.loads(result.stdout)["standing"]
    given = [s["content"] for s in listed if s["at_session_start"]]
    assert given == [GLOBAL, CHANGELOG] and all(text in block for text in given)
    assert RULE not in block and [s["at_session_start"] for s in listed] == [True, True, False]
    assert "1 of the 3 standing memories here does not fit" in result.stderr
    human = mnemo("standing", cwd=alpha)
    assert "at start" in human.stdout and "standing.budget_chars: 300" in human.stderr
    # storing one that will not be given at session start says so at once
    low = mnemo("remember", "--standing", "--importance", "0.1", "Tabs, not spaces.", cwd=alpha)
    assert low.exit_code == 0 and "2 of the 4 standing memories here do not fit" in low.stderr
    fits = mnemo("remember", "--standing", "Short.", "--json", cwd=alpha)
    assert fits.exit_code == 0 and "do not fit" not in fits.stderr


def recalled_part(text: str) -> str:
    """The prompt-time block of recalled memories (not the standing one)."""
    return "".join(block for block in text.split("</memory-data>")
                   if "<memory-data" in block and 'kind="standing"' not in block)


@pytest.mark.parametrize("start", [True, False], ids=["session-start", "first-prompt"])
def test_a_rule_the_budget_left_out_is_recalled_and_a_given_one_never_repeats(
        two, start: bool) -> None:
    alpha, _ = two
    configure(standing__budget_chars=300)  # the block holds GLOBAL and CHANGELOG, not RULE
    if start:
        assert fence_of(injected_text("claude-code", run_inprocess(
            "session-start", "claude-code", payload("claude-code", "session-start", cwd=alpha,
                                                    session="r1")), "session-start"))

    def prompt(text: str) -> str:
        return injected_text("claude-code", run_inprocess("prompt", "claude-code", payload(
            "claude-code", "prompt", cwd=alpha, session="r1", prompt=text)))

    first = prompt("which destructive command would drop the database?")
    assert RULE in recalled_part(first)  # left out of the block: recalled like any memory
    assert RULE not in "".join(fence_of(first))
    if not start:
        assert CHANGELOG in "".join(fence_of(first))  # the first prompt carried the block
    notes = prompt("follow the release notes changelog")
    assert CHANGELOG not in notes  # the block gave it: never again this session
    # a new session whose block had room for every rule never recalls one
    configure(standing__budget_chars=2000)
    roomy = injected_text("claude-code", run_inprocess("prompt", "claude-code", payload(
        "claude-code", "prompt", cwd=alpha, session="r2",
        prompt="which destructive command would drop the database?")))
    assert RULE in "".join(fence_of(roomy)) and RULE not in recalled_part(roomy)
