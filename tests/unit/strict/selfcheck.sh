#!/bin/bash
# Checks the strict-skip rule on deliberately skipping tests (see CMakeLists.txt here):
#   selfcheck.sh GTEST_PROBE INTEGRATION_DIR
# A skip must fail under GDBTRACE_STRICT=1 and under CI=true, pass when GDBTRACE_ALLOW_SKIP lists the
# key (selfcheck), and pass outside strict mode. Exit 0 when all hold.
set -uo pipefail
probe=$1
integration=$2
here=$(cd "$(dirname "$0")" && pwd)
failures=0

# expect WANT(pass|fail) WHAT ENV...: runs both probes with exactly ENV's strict variables.
expect() {
  local want=$1 what=$2
  shift 2
  local base=(env -u CI -u GDBTRACE_STRICT -u GDBTRACE_ALLOW_SKIP GDBTRACE_SERVER=/nonexistent/gdbtrace-server "$@")
  local got out
  for kind in gtest python; do
    if [ "$kind" = gtest ]; then
      out=$("${base[@]}" "$probe" 2>&1)
    else
      out=$(cd "$here" && "${base[@]}" PYTHONPATH="$integration" PYTHONDONTWRITEBYTECODE=1 \
        python3 -m unittest -v skip_probe 2>&1)
    fi
    [ $? = 0 ] && got=pass || got=fail
    # The python probe has three ways to skip: all three must go the same way.
    if [ "$kind" = python ] && [ "$got" = fail ] && ! grep -q "failures=3" <<<"$out"; then
      got="fail (not all three skips failed)"
    fi
    if [ "$got" = "$want" ]; then
      echo "ok: $kind probe, $what: $got"
    else
      echo "FAIL: $kind probe, $what: expected $want, got $got"
      echo "$out" | tail -15 | sed 's/^/    /'
      failures=$((failures + 1))
    fi
  done
}

expect fail "GDBTRACE_STRICT=1" GDBTRACE_STRICT=1
expect fail "CI=true" CI=true
expect fail "GDBTRACE_STRICT=1, another key allowed" GDBTRACE_STRICT=1 GDBTRACE_ALLOW_SKIP=one-cpu,no-gdb
expect pass "GDBTRACE_STRICT=1, key allowed" GDBTRACE_STRICT=1 GDBTRACE_ALLOW_SKIP=no-gdb,selfcheck
expect pass "not strict"
exit $((failures > 0))
