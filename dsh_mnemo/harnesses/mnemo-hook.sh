#!/bin/sh
# mnemo hook wrapper: what every harness config calls.
#
#   mnemo-hook.sh EVENT HARNESS  (EVENT: session-start | prompt | turn-end | session-end)
#
# It passes the harness's event (stdin) to `mnemo hook EVENT --harness HARNESS`
# and prints its answer.  It fails open: if mnemo is missing, crashes, or
# hangs past the limit, the harness sees exit 0 and no output (Codex's Stop
# hook gets the `{}` it requires).  `mnemo hooks install` writes a copy of
# this file with the placeholders below filled in; the copy in the source
# tree works as is when `mnemo` is on PATH.
#
# Installed, it runs mnemo's hook client instead (a small standard-library
# Python script): the client asks the resident server (`mnemo serve`) and,
# when there is none or it does not answer in time, becomes `mnemo hook`
# itself, which answers and starts the server for the next call.
#
# Environment: MNEMO_BIN (the mnemo executable), MNEMO_NO_SERVER=1 (always
# run `mnemo hook` in a process of its own), MNEMO_HOOK_WRAPPER_TIMEOUT
# (seconds before the wrapper kills that process; mnemo's own deadline is
# shorter).  It exports MNEMO_HOOK_PID, its own pid.

event="${1:-}"
harness="${2:-generic}"

# Nothing from this script or its children may reach the harness's stderr.
exec 2>/dev/null

# mnemo's deadline counts from when the harness started this script, not from
# when a loaded machine got round to starting mnemo itself.
MNEMO_HOOK_PID=$$
export MNEMO_HOOK_PID

# Filled in by `mnemo hooks install` (left as is, they are ignored).
installed_bin='@MNEMO_BIN@'
installed_data_dir='@MNEMO_DATA_DIR@'
installed_config='@MNEMO_CONFIG@'
installed_python='@MNEMO_PYTHON@'
installed_client='@MNEMO_CLIENT@'
installed_home='@MNEMO_HOME@'

neutral() {
    if [ "$harness" = "codex" ] && [ "$event" = "turn-end" ]; then
        printf '{}\n'
    fi
    exit 0
}

case "$installed_data_dir" in
    @*@ | "") ;;
    *) MNEMO_DATA_DIR="${MNEMO_DATA_DIR:-$installed_data_dir}"; export MNEMO_DATA_DIR ;;
esac
case "$installed_config" in
    @*@ | "") ;;
    *) MNEMO_CONFIG="${MNEMO_CONFIG:-$installed_config}"; export MNEMO_CONFIG ;;
esac

mnemo_bin="${MNEMO_BIN:-}"
if [ -z "$mnemo_bin" ]; then
    case "$installed_bin" in
        @*@ | "") mnemo_bin="$(command -v mnemo 2>/dev/null || true)" ;;
        *) mnemo_bin="$installed_bin" ;;
    esac
fi
if [ -z "$mnemo_bin" ] || [ ! -x "$mnemo_bin" ]; then
    neutral
fi

use_client=1
for value in "$installed_python" "$installed_client" "$installed_home"; do
    case "$value" in @*@ | "") use_client= ;; esac
done
if [ -n "$use_client" ] && [ -z "${MNEMO_NO_SERVER:-}" ] && [ -x "$installed_python" ] \
    && [ -f "$installed_client" ]; then
    # The client enforces the deadline and always exits 0 (Codex's Stop hook
    # gets its `{}`), falling back to `mnemo hook` by itself.  It is imported
    # from its directory, not run as a script, so its bytecode is cached.
    exec "$installed_python" -I -S -c '
import sys
sys.path.append(sys.argv[1])
try:
    from client import run
except BaseException:
    sys.stdout.write("{}\n" if sys.argv[2:4] == ["turn-end", "codex"] else "")
    raise SystemExit(0)
run(sys.argv[1:])' "${installed_client%/*}" "$event" "$harness" \
        "$mnemo_bin" "${MNEMO_DATA_DIR:-$installed_home}"
fi

limit="${MNEMO_HOOK_WRAPPER_TIMEOUT:-8}"
if command -v timeout >/dev/null 2>&1; then
    out="$(timeout -k 1 "$limit" "$mnemo_bin" hook "$event" --harness "$harness" 2>/dev/null)"
    rc=$?
else
    out="$("$mnemo_bin" hook "$event" --harness "$harness" 2>/dev/null)"
    rc=$?
fi
if [ "$rc" -ne 0 ]; then
    neutral
fi
if [ -n "$out" ]; then
    printf '%s\n' "$out"
fi
exit 0
