# Sourced by the host-side guest session scripts (gdb_session.sh, gdb_user.sh): the one way they
# start the host's gdb on a guest program, and the one way they judge its output.
# Needs $port (the guest stub's forwarded port) set by the caller.

# guest_gdb TIMEOUT OUT HOST_PROG GUEST_PROG ARGS [gdb options...]
# Runs /usr/bin/gdb in batch mode on HOST_PROG (the same binary as the guest's GUEST_PROG),
# connected to the guest stub, with GUEST_PROG started with ARGS and stopped at main; then the
# further options (-ex / -x ...). Output and "gdb exit N" go to OUT.
guest_gdb() {
  local limit=$1 out=$2 host_prog=$3 guest_prog=$4 args=$5
  shift 5
  timeout "$limit" /usr/bin/gdb -nx -batch \
    -ex "set pagination off" -ex "set confirm off" -ex "set auto-connect-native off" \
    -ex "file $host_prog" \
    -ex "target extended-remote 127.0.0.1:$port" \
    -ex "set remote exec-file $guest_prog" \
    -ex "set args $args" \
    -ex "break main" -ex "run" \
    "$@" >"$out" 2>&1
  echo "gdb exit $?" >>"$out"
}

# check_output NAME PATTERN FILE: "ok NAME" when FILE has a line matching the extended regex
# PATTERN, else "FAIL NAME: ..." (run.sh collects both).
check_output() {
  if grep -qE "$2" "$3"; then echo "ok $1"; else echo "FAIL $1: no /$2/ in $3"; fi
}
