"""Real developer layouts and session lifecycles, through the hooks (real storage)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_mnemo.workspace import binding
from tests.conftest import bind_repo, configure
from tests.hook.conftest import (
    all_rows,
    injected_text,
    log_text,
    payload,
    run_cli_hook,
    run_inprocess,
    user_rows,
)
from tests.workspace.conftest import add_submodule, commit_all, git

pytestmark = pytest.mark.usefixtures("roomy_deadline")

DEPLOY = "We deploy with make release, never by hand on Fridays"
QUESTION = "how do we deploy a release?"


def turn(harness: str, cwd: Path, prompt: str, reply: str = "Sure.",
         session: str = "s1") -> str:
    out = run_inprocess("prompt", harness, payload(harness, "prompt", cwd=cwd, session=session,
                                                   prompt=prompt))
    run_inprocess("turn-end", harness, payload(harness, "turn-end", cwd=cwd, session=session,
                                               prompt=prompt, reply=reply))
    return out


def test_a_turn_typed_in_an_unbound_submodule_is_the_superprojects(make_repo,
                                                                  data_dir: Path) -> None:
    app, sub = add_submodule(make_repo)
    bound = bind_repo(app)
    out = turn("claude-code", sub, DEPLOY)
    assert "has no project memory" not in out  # no bind hint: it is the app's checkout
    assert user_rows(data_dir) == [f"[USER] {DEPLOY}"]
    assert {sid for _, sid, _ in all_rows(data_dir, ("working_memory",))} == {bound.namespace}
    again = run_inprocess("prompt", "claude-code", payload("claude-code", "prompt", cwd=sub,
                                                           session="s2", prompt=QUESTION))
    assert "make release" in injected_text("claude-code", again)
    # Bound on purpose, the submodule has a memory of its own, and none of the app's.
    assert binding.bind(sub).status == "bound"
    mine = run_inprocess("prompt", "claude-code", payload("claude-code", "prompt", cwd=sub,
                                                          session="s3", prompt=QUESTION))
    assert "make release" not in mine


def test_a_subagents_stop_is_not_the_users_turn(repo: Path, data_dir: Path) -> None:
    configure(capture__roles=["user", "assistant"])
    prompt = payload("claude-code", "prompt", cwd=repo, session="s1", prompt=DEPLOY)
    assert run_cli_hook("prompt", "claude-code", prompt).returncode == 0
    # A SubagentStop wired to the turn-end hook, as Claude Code sends it mid-turn.
    subagent = payload("claude-code", "turn-end", cwd=repo, session="s1",
                       reply="Explore agent: found 3 files under src/")
    subagent.update(hook_event_name="SubagentStop", agent_id="a1f2", agent_type="Explore",
                    agent_transcript_path=str(repo / "missing.jsonl"))
    done = run_cli_hook("turn-end", "claude-code", subagent)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert run_cli_hook("turn-end", "claude-code", payload(
        "claude-code", "turn-end", cwd=repo, session="s1",
        reply="Released with make release.")).returncode == 0
    rows = [content for _, _, content in all_rows(data_dir, ("working_memory",))]
    assert sorted(rows) == sorted([f"[USER] {DEPLOY}",
                                   "[ASSISTANT] Released with make release."])
    assert "SubagentStop event is not the user's turn" in log_text(data_dir)


def test_a_prompt_typed_after_the_worktree_was_removed_reaches_the_repository(
        make_repo, data_dir: Path) -> None:
    main = make_repo("app")
    (main / "app.txt").write_text("a")
    commit_all(main)
    bound = bind_repo(main)  # the marker is not committed: the worktree uses main's
    linked = main.parent / "app-feature"
    git(main, "worktree", "add", "-q", "-b", "feature", str(linked))
    turn("claude-code", linked, "the feature branch renames the parser", session="w1")
    git(main, "worktree", "remove", "--force", str(linked))
    assert not linked.exists()
    out = turn("claude-code", linked, "after the worktree went, keep the old parser name",
               session="w1")
    assert out == ""  # nothing is read from a directory that is gone
    rows = all_rows(data_dir, ("working_memory",))
    assert sorted(content for _, _, content in rows) == [
        "[USER] after the worktree went, keep the old parser name",
        "[USER] the feature branch renames the parser"]
    assert {sid for _, sid, _ in rows} == {bound.namespace}
    # A session that never typed a prompt there does not guess a workspace for it.
    turn("claude-code", linked, "typed in a directory this session never saw", session="w2")
    assert len(all_rows(data_dir, ("working_memory",))) == 2
    assert "names no workspace this session was in: not captured" in log_text(data_dir)


def test_a_cursor_window_of_several_projects_captures_nothing_in_the_first(
        make_repo, data_dir: Path) -> None:
    alpha, beta = bind_repo(make_repo("alpha")), bind_repo(make_repo("beta"))
    (alpha.path / "docs").mkdir()

    def prompt(roots: list[str], text: str, session: str) -> None:
        document = payload("cursor", "prompt", cwd=roots[0], session=session, prompt=text)
        document["workspace_roots"] = roots
        assert run_inprocess("prompt", "cursor", document) == ""
        run_inprocess("session-end", "cursor", {"conversation_id": session,
                                                "workspace_roots": roots})

    # Two roots of one project: the first is as good as any.
    prompt([str(alpha.path), f"file://{alpha.path}/docs"], "alpha docs use mkdocs", "c1")
    # Two projects in one window: which one the prompt is about is not known.
    prompt([str(alpha.path), str(beta.path)], "beta's billing secret design", "c2")
    rows = all_rows(data_dir, ("working_memory",))
    assert [(sid, content) for _, sid, content in rows] == [
        (alpha.namespace, "[USER] alpha docs use mkdocs")]
    assert "workspace roots are several projects" in log_text(data_dir)


def test_the_transcript_fallback_skips_a_subagents_messages(repo: Path, tmp_path: Path,
                                                            data_dir: Path) -> None:
    import json

    configure(capture__roles=["user", "assistant"])
    transcript = tmp_path / "session.jsonl"

    def line(text: str, sidechain: bool) -> str:
        return json.dumps({"type": "assistant", "isSidechain": sidechain, "message": {
            "role": "assistant", "content": [{"type": "text", "text": text}]}}) + "\n"

    # An older Claude Code (no last_assistant_message) kept the subagent's messages in
    # the session's transcript; the main agent's reply came before its last tool call.
    transcript.write_text(line("Use the blue deploy lane.", False)
                          + line("Explore agent: read 12 files", True)
                          + json.dumps({"type": "assistant", "isSidechain": False,
                                        "message": {"role": "assistant", "content": [
                                            {"type": "tool_use", "name": "Bash"}]}}) + "\n")
    run_inprocess("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                   prompt="which deploy lane?"))
    end = payload("claude-code", "turn-end", cwd=repo)
    del end["last_assistant_message"]
    end["transcript_path"] = str(transcript)
    run_inprocess("turn-end", "claude-code", end)
    rows = sorted(c for _, _, c in all_rows(data_dir, ("working_memory",)))
    assert rows == ["[ASSISTANT] Use the blue deploy lane.", "[USER] which deploy lane?"]


def test_a_turn_the_agent_ended_in_another_repository_keeps_its_reply_with_its_prompt(
        make_repo, data_dir: Path) -> None:
    configure(capture__roles=["user", "assistant"])
    alpha, beta = bind_repo(make_repo("alpha")), bind_repo(make_repo("beta"))

    def hook(kind: str, cwd: Path, **fields: str) -> None:
        document = payload("claude-code", kind, cwd=cwd, session="cd1")
        document.update(fields)
        run_inprocess(kind, "claude-code", document)

    # Typed in alpha; the agent cd'd into beta during the turn, so Stop names beta.
    hook("prompt", alpha.path, prompt="port alpha's retry policy to beta")
    hook("turn-end", beta.path, last_assistant_message="Ported the retry policy.")
    # The session goes on in beta: its own turn there.
    hook("prompt", beta.path, prompt="now run beta's tests")
    hook("turn-end", beta.path, last_assistant_message="All green.")
    rows: dict[str, list[str]] = {}
    for _, namespace, content in all_rows(data_dir, ("working_memory",)):
        rows.setdefault(namespace, []).append(content)
    assert sorted(rows[alpha.namespace]) == ["[ASSISTANT] Ported the retry policy.",
                                             "[USER] port alpha's retry policy to beta"]
    assert sorted(rows[beta.namespace]) == ["[ASSISTANT] All green.",
                                            "[USER] now run beta's tests"]
