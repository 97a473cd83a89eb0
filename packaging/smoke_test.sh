#!/usr/bin/env bash
# Smoke-test a built bundle (make bundle runs it): the CLI reports its version and plans
# a catalog model on a rig file exactly as the checkout does, the window starts offscreen
# and quits cleanly, and the bundle installs into a prefix and runs from there.
# Usage: packaging/smoke_test.sh [BUNDLE_DIR]   (default: dist/RigSpark)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE=$(cd "${1:-$ROOT/dist/RigSpark}" && pwd)
CLI=$BUNDLE/rigspark-plan
GUI=$BUNDLE/rigspark
RIG=$ROOT/examples/rig-2x3090.json
MODEL=llama-3.3-70b-instruct  # does not fit one 3090; the plan splits it over two
PY=$ROOT/.venv/bin/python
[ -x "$PY" ] || PY=python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Run from elsewhere, with a throwaway config, so nothing leans on the checkout or the user.
cd "$TMP"
export XDG_CONFIG_HOME=$TMP/config XDG_CACHE_HOME=$TMP/cache

fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
ok() { echo "smoke: ok: $*"; }

version=$(sed -n 's/^APP_VERSION = "\(.*\)"$/\1/p' "$ROOT/rigspark_gui/identity.py")
got=$("$CLI" --version) || fail "rigspark-plan --version exited $?"
[ "$got" = "rigspark-plan $version" ] || fail "--version said '$got', expected 'rigspark-plan $version'"
ok "$got"

rc=0
"$CLI" plan --model "$MODEL" --rig "$RIG" --context 32k --json >plan.json 2>plan.err || rc=$?
# 0: the recommended path fits, 1: nothing fits; 2 and 3 are errors.
[ "$rc" -le 1 ] || fail "plan --json exited $rc: $(cat plan.err)"
"$PY" - plan.json <<'PYEOF' || fail "plan --json output is not a plan"
import json, sys
plan = json.load(open(sys.argv[1]))
assert isinstance(plan.get("schema_version"), int), "no schema_version"
assert plan.get("paths"), "no paths"
PYEOF
ok "plan --json ($MODEL on $(basename "$RIG")): schema_version $("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["schema_version"])' plan.json)"

# The frozen engine must give the same figures as the checkout's.
if [ -x "$ROOT/.venv/bin/rigspark-plan" ]; then
    "$ROOT/.venv/bin/rigspark-plan" plan --model "$MODEL" --rig "$RIG" --context 32k --json \
        >plan-checkout.json || true
    cmp -s plan.json plan-checkout.json || fail "bundled plan differs from the checkout's"
    ok "bundled plan matches the checkout byte for byte"
fi

rc=0
QT_QPA_PLATFORM=offscreen RIGSPARK_SMOKE_EXIT_MS=3000 timeout 120 "$GUI" >gui.log 2>&1 || rc=$?
[ "$rc" -eq 0 ] || fail "rigspark (offscreen) exited $rc: $(tail -20 gui.log)"
if grep -E "Traceback|Error|Could not (find|load)|Cannot load" gui.log; then
    fail "rigspark (offscreen) logged an error"
fi
ok "rigspark started offscreen and quit cleanly"

"$ROOT/packaging/install_bundle.sh" "$BUNDLE" "$TMP/prefix" >/dev/null
got=$("$TMP/prefix/bin/rigspark-plan" --version) || fail "installed rigspark-plan failed"
[ -f "$TMP/prefix/share/applications/io.github.rigspark.RigSpark.desktop" ] \
    || fail "install did not place the .desktop file"
ok "install_bundle.sh into a prefix: $got"

echo "smoke: bundle $(du -sh "$BUNDLE" | cut -f1) at $BUNDLE passed"
