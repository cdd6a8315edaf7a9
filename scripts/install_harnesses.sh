#!/usr/bin/env bash
# Install the harness CLIs that tests/real_harness runs (Claude Code, Codex CLI,
# Gemini CLI, Qwen Code) at the exact versions of tests/real_harness/package-lock.json,
# into a cache directory, and print that install's node_modules/.bin directory on
# stdout (the only line on stdout; progress and errors go to stderr).
#
#   MNEMO_HARNESS_CACHE   where to install (default:
#                         ${XDG_CACHE_HOME:-$HOME/.cache}/mnemo-test/harnesses/<lock hash>)
#
# Idempotent: a finished install (marked by .mnemo-installed) is reused at once.
# Without node or npm it prints why on stderr and exits 0 with nothing on stdout,
# so callers can skip; a failed install (offline, say) exits 1.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
spec="$here/tests/real_harness"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install_harnesses: $tool is not installed; the real-harness tests will be skipped" >&2
    exit 0
  fi
done

lock_hash="$(sha256sum "$spec/package-lock.json" | cut -c1-12)"
dest="${MNEMO_HARNESS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mnemo-test/harnesses/$lock_hash}"
bin="$dest/node_modules/.bin"
marker="$dest/.mnemo-installed"

if [ -f "$marker" ] && [ "$(cat "$marker")" = "$lock_hash" ] && [ -x "$bin/claude" ] \
  && [ -x "$bin/codex" ] && [ -x "$bin/gemini" ] && [ -x "$bin/qwen" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$dest"
cp "$spec/package.json" "$spec/package-lock.json" "$dest/"
rm -f "$marker"
echo "install_harnesses: npm ci into $dest" >&2
# --ignore-scripts: no native builds of optional interactive-only modules (node-pty,
# keytar), which would want compilers and Node headers. Claude Code's own postinstall
# (it copies the platform binary over its placeholder) is the one script we need,
# and it is run explicitly below.
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
  --no-update-notifier >&2) || {
  echo "install_harnesses: npm ci failed (is the npm registry reachable?)" >&2
  exit 1
}
(cd "$dest/node_modules/@anthropic-ai/claude-code" && node install.cjs >&2) || {
  echo "install_harnesses: Claude Code's install.cjs failed" >&2
  exit 1
}
# Each CLI must start. In a throwaway HOME: some create their config dir even
# for --version, and the user's own must not be touched.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for tool in claude codex gemini qwen; do
  if ! (cd "$scratch" && env -u CLAUDE_CONFIG_DIR -u CODEX_HOME -u GEMINI_CLI_HOME -u QWEN_HOME \
      HOME="$scratch" XDG_CONFIG_HOME="$scratch/.config" XDG_CACHE_HOME="$scratch/.cache" \
      "$bin/$tool" --version >/dev/null 2>&1); then
    echo "install_harnesses: $bin/$tool --version failed" >&2
    exit 1
  fi
done
echo "$lock_hash" >"$marker"
echo "$bin"
