#!/bin/bash
# The quick-start demo: installs what is missing, builds, and serves the bundled demo program
# (tests/programs/demo.c: threads, a struct array, a loop calling step_particle()) with
#   gdbtrace-server --multi 127.0.0.1:1234
# then prints the gdb command to connect. Stop it with Ctrl-C.
#
#   scripts/demo.sh            serve and wait for gdb (interactive)
#   scripts/demo.sh --batch    serve, run a scripted gdb session against it, print it, exit (CI smoke)
#   scripts/demo.sh --trace    like --batch, but a tracepoint session (trace/actions/tstart/tfind/tdump)
# Environment: PORT (default 1234), BUILD_DIR (default ./build), GDBTRACE_SERVER (default: the built one),
# SKIP_BUILD=1 to use what is already built, DEMO=m32_quickstart_demo for the same program built as
# an i386 (gcc -m32) program.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
port=${PORT:-1234}
mode=${1:-serve}

mkdir -p "$build"
if [ -z "${SKIP_BUILD:-}" ]; then
  echo "demo.sh: installing missing packages and building into $build (log: $build/demo-build.log)"
  "$repo/scripts/build.sh" >"$build/demo-build.log" 2>&1 || {
    tail -40 "$build/demo-build.log" >&2
    echo "demo.sh: build failed (log: $build/demo-build.log)" >&2
    exit 1
  }
fi
server=${GDBTRACE_SERVER:-$build/gdbserver-agent/src/server/gdbtrace-server}
demo=$build/tests/programs/${DEMO:-demo}
[ -x "$server" ] || { echo "demo.sh: $server was not built" >&2; exit 1; }

gdb_cmd=(gdb -q "$demo"
  -ex "target extended-remote 127.0.0.1:$port"
  -ex "set remote exec-file $demo"
  -ex "break step_particle"
  -ex "run")

if [ "$mode" = serve ]; then
  cat <<MSG
Serving the demo program with: $server --multi 127.0.0.1:$port
In another terminal, connect with:

  ${gdb_cmd[0]} ${gdb_cmd[1]} ${gdb_cmd[2]} -ex 'target extended-remote 127.0.0.1:$port' -ex 'set remote exec-file $demo' -ex 'break step_particle' -ex 'run'

then try: bt, print *p, print particles, info threads, next, finish, watch total_steps, continue.
Tracing: see README.md "Tracing walkthrough". Ctrl-C here stops the server.
MSG
  exec "$server" --multi "127.0.0.1:$port"
fi

# --batch / --trace: the same thing, scripted, for CI and for a quick look without a second terminal.
log=$(mktemp /tmp/gdbtrace-demo.XXXXXX)
"$server" --multi "127.0.0.1:$port" >"$log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null; wait $server_pid 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do grep -q "Listening on port" "$log" && break; sleep 0.05; done

common=(-nx -batch -iex "set pagination off" -iex "set confirm off" -iex "set debuginfod enabled off")
if [ "$mode" = --trace ]; then
  script=$(mktemp /tmp/gdbtrace-demo-trace.XXXXXX)
  cat >"$script" <<'GDB'
break main
run
trace step_particle
actions
collect *p, tick, total_steps
end
tstart
break exit
continue
tstop
tstatus
tfind start
tdump
tfind 5
print tick
print *p
tfind none
info tracepoints
GDB
  set +e
  gdb "${common[@]}" "$demo" -ex "target extended-remote 127.0.0.1:$port" \
    -ex "set remote exec-file $demo" -ex "set args 20 0" -x "$script" 2>&1
  rc=$?
  rm -f "$script"
else
  set +e
  gdb "${common[@]}" "$demo" -ex "target extended-remote 127.0.0.1:$port" -ex "set remote exec-file $demo" \
    -ex "set args 5 0" -ex "break step_particle" -ex run -ex bt -ex "print *p" -ex "print particles[1].pos" \
    -ex "info threads" -ex finish -ex "delete" -ex continue 2>&1
  rc=$?
fi
echo "--- server output ---"
cat "$log"
exit $rc
