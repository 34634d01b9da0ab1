#!/bin/bash
# `cmake --install` into a staging prefix, then the installed tree (not the build tree) at work:
#   the prefix holds exactly the expected files (expected-files.txt + the plugin modules, module
#     sources and shared sources of this checkout)
#   bin/gdbtrace-server --version reports the project version
#   the man pages render and name every option of --help and every `monitor help` command
#   the auto-load hook loads the plugin from the prefix
#   the installed server passes a gdb-driven tracing test (tests/integration, collector `auto`)
#
#   tests/install/staging.sh      Environment: BUILD_DIR (default ./build, built by scripts/build.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$repo/build}
stage=$build/install-test/staging
. "$(dirname "$0")/lib.sh"

rm -rf "$stage"
mkdir -p "$build/install-test"
cmake --install "$build" --prefix "$stage" >"$build/install-test/staging-install.log" ||
  { cat "$build/install-test/staging-install.log"; echo "FAIL: cmake --install"; exit 1; }

expected_files() {
  sed "s/@VERSION@/$version/" "$here/expected-files.txt"
  local f
  for f in "$repo"/gdb-plugin/gdbtrace_plugin/*.py; do echo "share/gdbtrace/gdbtrace_plugin/${f##*/}"; done
  for f in "$repo"/kmodule/*.[ch] "$repo"/kmodule/uapi/*.h; do
    [[ $f == *.mod.c ]] || echo "src/gdbtrace-$version/${f#"$repo"/kmodule/}"
  done
  for f in "$repo"/gdbserver-agent/src/shared/*/*.[ch] "$repo"/gdbserver-agent/src/shared/*/*.def; do
    echo "src/gdbtrace-$version/shared/${f#"$repo"/gdbserver-agent/src/shared/}"
  done
}
if diff -u <(expected_files | sort) <(cd "$stage" && find . -type f -o -type l | sed 's|^\./||' | sort) \
  >"$build/install-test/staging-files.diff"; then
  ok "staging prefix holds exactly the $(expected_files | wc -l) expected files"
else
  cat "$build/install-test/staging-files.diff"
  fail "installed files differ from the expected list (- missing, + unexpected)"
fi

server=$stage/bin/gdbtrace-server
out=$("$server" --version 2>&1 || true)
if grep -q "^gdbtrace-server $version " <<<"$out"; then ok "--version: $(head -1 <<<"$out")"; else fail "--version: $out"; fi

man1=$(MANWIDTH=200 man -l "$stage/share/man/man1/gdbtrace-server.1.gz" 2>&1 || true)
missing=()
# An empty list would make the loops below pass without checking anything.
options=$("$server" --help | grep -o -- '--[a-z][a-z-]*' | sort -u || true)
[ -n "$options" ] || fail "no options from \`gdbtrace-server --help\`"
for option in $options; do
  grep -q -- "$option" <<<"$man1" || missing+=("$option")
done
# `monitor help` lists each command on a line indented by two spaces.
monitor=$(timeout 60 gdb -nx -batch -ex "target extended-remote | $server --multi -" -ex "monitor help" \
  -ex "monitor exit" 2>&1 || true)
commands=$(sed -n 's/^  \([a-z][a-z -]*[a-z]\)\( <.*\)\?$/\1/p' <<<"$monitor")
[ -n "$commands" ] || fail "no monitor commands from \`monitor help\`: $monitor"
while read -r command; do
  [ -z "$command" ] || grep -q -- "$command" <<<"$man1" || missing+=("monitor $command")
done <<<"$commands"
if [ ${#missing[@]} = 0 ]; then
  ok "gdbtrace-server(1) names every --help option and monitor command ($(wc -l <<<"$commands") commands)"
else
  fail "gdbtrace-server(1) lacks: ${missing[*]}"
fi

man7=$(MANWIDTH=200 man -l "$stage/share/man/man7/gdbtrace.7.gz" 2>&1 || true)
subs=$(gdb -nx -batch -x "$repo/gdb-plugin/gdbtrace.py" -ex "help gdbtrace" | sed -n 's/^gdbtrace \([a-z-]*\) -- .*/\1/p')
[ -n "$subs" ] || fail "no plugin commands from \`help gdbtrace\`"
for sub in $subs; do
  grep -q "gdbtrace $sub" <<<"$man7" || fail "gdbtrace(7) lacks the command gdbtrace $sub"
done
ok "gdbtrace(7) documents every plugin command ($(wc -w <<<"$subs") commands)"

# gdb runs the hook as it would from its data directory; the plugin must come from the prefix.
hook=$stage/share/gdb/python/gdb/command/gdbtrace_autoload.py
# check_hook HOOK COMMAND PLUGIN_DIR WHAT: gdb sourcing HOOK has `gdbtrace COMMAND`, and its plugin
# comes from PLUGIN_DIR.
check_hook() {
  local out
  out=$(gdb -nx -batch -ex "source $1" -ex "help gdbtrace $2" \
    -ex "python import gdbtrace_plugin; print('plugin from', gdbtrace_plugin.__file__)" 2>&1 || true)
  if grep -q "Usage: gdbtrace $2" <<<"$out" && grep -q "plugin from $3" <<<"$out"; then
    ok "$4"
  else
    fail "$4: $out"
  fi
}
check_hook "$hook" status "$stage/share/gdbtrace/" "the auto-load hook loads the plugin from the prefix"

# install.sh --system from the installed tree copies the plugin and the same hook into a gdb
# data directory (a scratch one here).
datadir=$build/install-test/gdb-data
rm -rf "$datadir"
GDB_DATA_DIRECTORY=$datadir "$stage/share/gdbtrace/install.sh" --system >/dev/null
check_hook "$datadir/python/gdb/command/gdbtrace_autoload.py" stats "$datadir/python/gdb/command/" \
  "share/gdbtrace/install.sh --system installs a working hook"

echo "=== gdb-driven tracing test against $server"
if (cd "$repo/tests/integration" &&
  GDBTRACE_SERVER=$server GDBTRACE_PROGRAMS=$build/tests/programs GDBTRACE_SOURCE_DIR=$repo \
    GDBTRACE_TEST_BACKEND=auto PYTHONDONTWRITEBYTECODE=1 \
    python3 -m unittest -v test_trace_basic.Collect.test_regs_args_locals_globals); then
  ok "installed gdbtrace-server passes test_trace_basic.Collect.test_regs_args_locals_globals"
else
  fail "installed gdbtrace-server fails the tracing test"
fi

echo
if [ "$failures" = 0 ]; then echo "staging: all checks passed"; else echo "staging: $failures check(s) failed"; fi
exit $((failures > 0))
