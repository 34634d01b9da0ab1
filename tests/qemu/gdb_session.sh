#!/bin/bash
# Drives gdbtrace-server in the QEMU guest with the host's /usr/bin/gdb through
# the forwarded port: trace/actions/tstart/tfind/tdump/tsave with the module
# backend. Prints "ok NAME" / "FAIL NAME: why" lines (run.sh collects them).
#   gdb_session.sh PORT WORKDIR INITRAMFS_ROOT
set -u
port=$1 work=$2 root=$3
prog=$root/bin/gt_loop
out=$work/gdb-trace.out
tfile=$work/gt_loop.tf
rm -f "$tfile"
N=2000

here=$(cd "$(dirname "$0")" && pwd)
. "$here/gdb_lib.sh"
check() { check_output "gdb_$1" "$2" "${3:-$out}"; } # name pattern [file]

# Debugger semantics at emulated sites (first connection; the server stays up):
# stepi onto and over a probed `add` executes exactly that instruction (the
# module does not emulate while TF is set). (A gdb hardware watchpoint on an
# emulated store is covered at the ioctl level by gt_safety: stepping a store
# onto a watched address hangs QEMU's TCG, with or without the module.)
sites=$work/gdb-sites.out
cat >"$work/sites.gdb" <<EOT
trace *step_site+1
actions
collect \$regs
end
trace *store_site
actions
collect \$regs
end
EOT
guest_gdb 180 "$sites" "$prog" /bin/gt_loop "10" \
  -x "$work/sites.gdb" \
  -ex "break *step_site" \
  -ex "tstart" \
  -ex "continue" \
  -ex "stepi" \
  -ex "echo STEP1: " -ex "output (long)\$pc - (long)&step_site" -ex "echo \\n" \
  -ex "stepi" \
  -ex "echo STEP2: " -ex "output (long)\$pc - (long)&step_site" -ex "echo \\n" \
  -ex "echo RDI: " -ex "output \$rdi" -ex "echo \\n" \
  -ex "break done" \
  -ex "continue" \
  -ex "echo WATCHED: " -ex "output watched" -ex "echo \\n" \
  -ex "tstop" \
  -ex "tstatus" \
  -ex "kill"
check stepi_onto_site "STEP1: ?1$" "$sites"
check stepi_one_instruction "STEP2: ?5$" "$sites"
check stepi_add_ran_once "RDI: ?42$" "$sites"
check store_site_ran "WATCHED: ?1234$" "$sites"
check sites_collected "Collected 2 trace frames" "$sites"

# The eBPF collector in the guest, on the same sites (the server keeps the backend choice across
# connections: set back to auto at the end). From Linux 6.19 its programs emulate the probed
# instruction (register writes; bpf/bpf_emulate.h): probe_me's rip-relative load and step_site+1's
# add run in the program, store_site's store is still single-stepped by the kernel. Before 6.19 the
# kernel single-steps all three and the backend says why. Either way the program's results and the
# frames must be exact, and stepi onto and over an emulated site executes exactly one instruction.
bpfout=$work/gdb-ebpf.out
NB=300
cat >"$work/ebpf.gdb" <<EOT
trace probe_me
actions
collect a, b
end
trace *step_site+1
actions
collect \$regs
end
trace *store_site
actions
collect \$rsi
end
EOT
guest_gdb 240 "$bpfout" "$prog" /bin/gt_loop "$NB" \
  -ex "monitor gdbtrace backend ebpf" \
  -x "$work/ebpf.gdb" \
  -ex "break *step_site" \
  -ex "break done" \
  -ex "tstart" \
  -ex "continue" \
  -ex "stepi" \
  -ex "echo STEP1: " -ex "output (long)\$pc - (long)&step_site" -ex "echo \\n" \
  -ex "stepi" \
  -ex "echo STEP2: " -ex "output (long)\$pc - (long)&step_site" -ex "echo \\n" \
  -ex "echo RDI: " -ex "output \$rdi" -ex "echo \\n" \
  -ex "continue" \
  -ex "echo SINK: " -ex "output sink" -ex "echo \\n" \
  -ex "echo WATCHED: " -ex "output watched" -ex "echo \\n" \
  -ex "monitor gdbtrace status" \
  -ex "monitor gdbtrace backend" \
  -ex "tstop" \
  -ex "tstatus" \
  -ex "tfind tracepoint 3" \
  -ex "echo ADD-RDI: " -ex "output \$rdi" -ex "echo \\n" \
  -ex "tfind 123" \
  -ex "echo A123: " -ex "output a" -ex "echo \\n" \
  -ex "tfind none" \
  -ex "monitor gdbtrace backend auto" \
  -ex "kill"
# The checking kernels (debug, noskip: tinyconfig plus debug.config) are built without BPF; the
# eBPF collector is proven on the matrix kernels. Anywhere else a missing backend fails.
series=$(basename "$work")
if { [ "$series" = debug ] || [ "$series" = noskip ]; } && grep -q "no backend 'ebpf'" "$bpfout"; then
  echo "SKIP gdb_ebpf: the $series kernel is built without BPF"
else
  check ebpf_backend "tracepoint 2 at 0x[0-9a-f]+: backend ebpf, hits $NB, frames $NB" "$bpfout"
  check ebpf_frames "Collected $((NB + 2)) trace frames" "$bpfout"
  check ebpf_frame_a "A123: ?123$" "$bpfout"
  check ebpf_stepi_onto_site "STEP1: ?1$" "$bpfout"
  check ebpf_stepi_one_instruction "STEP2: ?5$" "$bpfout"
  check ebpf_stepi_add_ran_once "RDI: ?42$" "$bpfout"
  # The one hit at step_site+1 was the stepi over it (trap flag set: single-stepped, not emulated).
  check ebpf_add_frame_before "ADD-RDI: ?41$" "$bpfout"
  # sink = sum of 4i for i < NB, + step_site(41) + store_site(&watched, 1234): every site ran once.
  check ebpf_program_results "SINK: ?$((2 * NB * (NB - 1) + 42 + 1234))$" "$bpfout"
  check ebpf_store_site_ran "WATCHED: ?1234$" "$bpfout"
  krel=$(sed -n 's/.*generated BPF program[^(]*(Linux \([0-9]*\.[0-9]*\).*/\1/p' "$bpfout" | head -1)
  if [ -n "$krel" ] && [ "$(printf '%s\n6.19\n' "$krel" | sort -V | head -1)" = 6.19 ]; then
    check ebpf_emulates "common instructions emulated by the program" "$bpfout"
    check ebpf_load_emulated "tracepoint 2 at 0x[0-9a-f]+: backend ebpf, hits $NB, frames $NB, drops 0, after stop 0, errors 0, emulated $NB$" "$bpfout"
    check ebpf_store_not_emulated "tracepoint 4 at 0x[0-9a-f]+: backend ebpf, hits 1, frames 1, drops 0, after stop 0, errors 0$" "$bpfout"
  else
    check ebpf_says_why_not "register writes need Linux 6.19" "$bpfout"
    if grep -q ", emulated [0-9]" "$bpfout"; then echo "FAIL gdb_ebpf_no_emulation: emulated hits before Linux 6.19"; else echo "ok gdb_ebpf_no_emulation"; fi
  fi
fi

# Call stacks through the module (`monitor gdbtrace stacks on`): gt_loop is -O2, static, so only
# its CFI unwinds probe_me's hits; the stub unwinds them in the guest (qGdbtrace.stacks).
stacks=$work/gdb-stacks.out
guest_gdb 180 "$stacks" "$prog" /bin/gt_loop "50" \
  -ex "break done" \
  -ex "monitor gdbtrace stacks on" \
  -ex "trace probe_me" \
  -ex "tstart" \
  -ex "continue" \
  -ex "monitor gdbtrace status" \
  -ex "tstop" \
  -ex "maint packet qGdbtrace.stacks:0,1" \
  -ex "monitor gdbtrace stacks off" \
  -ex "kill"
check stacks_module_backend "tracepoint 3 at 0x[0-9a-f]+: backend module" "$stacks"

# Two call paths to one leaf (-O2, no frame pointers: CFI only), folded by the host gdb's plugin from
# the stacks the guest's stub unwound: exactly 300 and 700 (issue 15's proof for the module).
folded=$work/gt_stacks.folded
rm -f "$folded"
guest_gdb 300 "$work/gdb-stacks2.out" "$root/bin/gt_stacks" /bin/gt_stacks "" \
  -ex "source $here/../../gdb-plugin/gdbtrace.py" \
  -ex "set trace-buffer-size 67108864" \
  -ex "monitor gdbtrace stacks on" \
  -ex "trace leaf" \
  -ex "tstart" \
  -ex "continue" \
  -ex "monitor gdbtrace status" \
  -ex "tstop" \
  -ex "gdbtrace stacks -top 3 -folded $folded" \
  -ex "monitor gdbtrace stacks off"
check stacks_two_paths_backend "tracepoint [0-9]+ at 0x[0-9a-f]+: backend module, hits 1001, frames 1001" "$work/gdb-stacks2.out"
if [ -s "$folded" ]; then cp "$folded" "$work/gdb-stacks2.folded"; else echo "(no folded file)" >"$work/gdb-stacks2.folded"; fi
check stacks_two_paths_a "(^|;)main;path_a;common;leaf 300$" "$work/gdb-stacks2.folded"
check stacks_two_paths_b "(^|;)main;path_b;common;leaf 700$" "$work/gdb-stacks2.folded"
check stacks_unwound 'received: "[ml]M0 [0-9a-f]*;full;[^;]*gt_loop.*S[0-9a-f]+ probe_me;gt_loop;.*S[0-9a-f]+ main;gt_loop;.*F0 T3 ok' "$stacks"

# Streaming with the module collector: every frame of the run is in the guest's file (the stub writes
# it; `remote get` fetches it through vFile), the rings are sized for a stream, and the file's status
# line carries the run's counts (hits = frames + drops + after stop), drops by CPU when there were any.
SN=20000
cat >"$work/stream.gdb" <<EOT
trace probe_me
actions
collect \$regs, a
end
EOT
rm -f "$work/gt_loop_stream.tf"
guest_gdb 300 "$work/gdb-stream.out" "$prog" /bin/gt_loop "$SN" \
  -ex "break done" \
  -x "$work/stream.gdb" \
  -ex "monitor gdbtrace stream /tmp/gt_loop_stream.tf" \
  -ex "tstart" \
  -ex "continue" \
  -ex "tstop" \
  -ex "monitor gdbtrace status" \
  -ex "monitor gdbtrace backend" \
  -ex "remote get /tmp/gt_loop_stream.tf $work/gt_loop_stream.tf" \
  -ex "kill"
# Under TCG the drain may fall behind: every hit must then be a frame or a counted drop, and the file
# must hold the frames and a loss marker per drop seen (docs/streaming.md).
srow=$(grep -oE "tracepoint [0-9]+ at 0x[0-9a-f]+: backend module, hits [0-9]+, frames [0-9]+, drops [0-9]+" "$work/gdb-stream.out" | tail -1)
sframes=$(sed -E 's/.*frames ([0-9]+).*/\1/' <<<"$srow") sdrops=$(sed -E 's/.*drops ([0-9]+)$/\1/' <<<"$srow")
if [ -n "$srow" ] && [ "$((sframes + sdrops))" = "$SN" ] && grep -q "hits $SN," <<<"$srow"; then
  echo "ok gdb_stream_module_counts ($srow)"
else
  echo "FAIL gdb_stream_module_counts: hits $SN = frames + drops, module backend: '${srow:-no status row}'"
fi
check stream_rings "per-CPU rings of [0-9]+ KiB" "$work/gdb-stream.out"
if [ -s "$work/gt_loop_stream.tf" ]; then
  /usr/bin/gdb -nx -batch -ex "file $prog" -ex "target tfile $work/gt_loop_stream.tf" -ex "tstatus" \
    -ex "tfind 12345" -ex "echo A12345: " -ex "output a" -ex "echo \\n" >"$work/gdb-stream-tfile.out" 2>&1
  sstatus=$(grep -a '^status' "$work/gt_loop_stream.tf")
  field() { grep -oE ";$1:[0-9a-f]+" <<<"$sstatus" | cut -d: -f2; }
  markers=$((16#$(field gdbtrace_drop_markers)))
  if [ "$((16#$(field gdbtrace_hits)))" = "$SN" ] && [ "$((16#$(field gdbtrace_drops)))" = "${sdrops:-x}" ] &&
    [ "$((16#$(field tframes)))" = "$((sframes + markers))" ] && { [ "$sdrops" = 0 ] || [ "$markers" -gt 0 ]; }; then
    echo "ok gdb_stream_file_counts (frames $sframes, drops $sdrops, loss markers $markers)"
  else
    echo "FAIL gdb_stream_file_counts: status line '$sstatus' against frames $sframes drops $sdrops"
  fi
  if [ "$sdrops" = 0 ]; then
    check stream_file_frames "Collected $SN trace frames" "$work/gdb-stream-tfile.out"
    check stream_file_frame_a "A12345: ?12345$" "$work/gdb-stream-tfile.out"
  else
    check stream_file_frames "Buffer contains $((sframes + markers)) trace frames \\(of $sframes created total\\)" "$work/gdb-stream-tfile.out"
  fi
else
  echo "FAIL gdb_stream_file: no stream file fetched ($(tail -2 "$work/gdb-stream.out" | tr '\n' ' '))"
fi

# Tracepoints with actions need a command file (multi-line commands).
cat >"$work/tracepoints.gdb" <<EOT
trace probe_me
actions
collect \$regs, a, b, marker
end
trace probe_me if a == 1500
actions
collect a
end
trace scale
actions
collect \$regs
end
EOT

guest_gdb 240 "$out" "$prog" /bin/gt_loop "$N" \
  -ex "break done" \
  -x "$work/tracepoints.gdb" \
  -ex "tstart" \
  -ex "continue" \
  -ex "monitor gdbtrace status" \
  -ex "monitor gdbtrace backend" \
  -ex "tstop" \
  -ex "tstatus" \
  -ex "tfind tracepoint 3" \
  -ex "echo FIRST-A: " -ex "output a" -ex "echo \\n" \
  -ex "tfind 1234" \
  -ex "echo A1234: " -ex "output a" -ex "echo \\n" \
  -ex "echo B1234: " -ex "output b" -ex "echo \\n" \
  -ex "echo PC: " -ex "output/x \$pc" -ex "echo \\n" \
  -ex "echo MARKER: " -ex "output marker" -ex "echo \\n" \
  -ex "tdump" \
  -ex "tfind tracepoint 4" \
  -ex "echo TP2-A: " -ex "output a" -ex "echo \\n" \
  -ex "eval \"tfind %d\", \$trace_frame - 1" \
  -ex "echo BEFORE-TP2-A: " -ex "output a" -ex "echo \\n" \
  -ex "tfind tracepoint 5" -ex "tfind tracepoint 5" \
  -ex "echo SCALE-X: " -ex "output x" -ex "echo \\n" \
  -ex "echo XMM0: " -ex "output \$xmm0.v2_double[0]" -ex "echo \\n" \
  -ex "echo YMM1: " -ex "output \$ymm1.v8_float[7]" -ex "echo \\n" \
  -ex "echo FCTRL: " -ex "output/x \$fctrl" -ex "echo \\n" \
  -ex "tfind none" \
  -ex "tsave $tfile" \
  -ex "kill" \
  -ex "monitor exit"

check module_backend "tracepoint 3 at 0x[0-9a-f]+: backend module"
check frames "Collected $((N + 1 + 3)) trace frames"
check first_frame "FIRST-A: ?0$"
check frame_1234_a "A1234: ?1234$"
check frame_1234_b "B1234: ?3702$"
addr=$(sed -n 's/^Tracepoint 3 at \(0x[0-9a-f]*\).*/\1/p' "$out")
check frame_pc "PC: ?${addr:-none}$"
check marker 'MARKER: ?"hello-gdbtrace'
check tdump "^rip +0x[0-9a-f]+ +0x[0-9a-f]+ <probe_me"
check condition_tp "TP2-A: ?1500$"
# Tracepoints 3 and 4 share probe_me: one hit's frames come in definition order (3, then 4).
check definition_order "BEFORE-TP2-A: ?1500$"
# Where the module's load-time self-test found the kernel single-stepping after a moved ip
# (gt_limits printed its verdict on the console), the stub must say so instead.
if grep -q "module emulation self-test: kernel single-steps" "$work/console.log" 2>/dev/null; then
  check emulation "single-stepped by the kernel \\(the module's self-test saw this kernel single-step"
else
  check emulation "common instructions emulated"
fi
# collect $regs through the module carries the x87/SSE/AVX state too (kmodule/fpu.c): the double
# argument in xmm0, a 256-bit value's upper half, the x87 control word.
check fpu_double_arg "SCALE-X: ?1.25$"
check fpu_xmm0 "XMM0: ?1.25$"
check fpu_ymm_upper "YMM1: ?3.5$"
check fpu_fctrl "FCTRL: ?0x37f$"

# The saved trace file, read back by a fresh gdb.
if [ -s "$tfile" ]; then
  /usr/bin/gdb -nx -batch -ex "file $prog" -ex "target tfile $tfile" -ex "tfind 777" \
    -ex "echo A777: " -ex "output a" -ex "echo \\n" \
    -ex "tfind $((N + 2))" \
    -ex "echo SCALE-X: " -ex "output x" -ex "echo \\n" >"$work/gdb-tfile.out" 2>&1
  if grep -qE "A777: ?777$" "$work/gdb-tfile.out"; then echo "ok gdb_tsave"; else echo "FAIL gdb_tsave: $(tail -3 "$work/gdb-tfile.out")"; fi
  check tsave_fpu_double_arg "SCALE-X: ?1.25$" "$work/gdb-tfile.out"
else
  echo "FAIL gdb_tsave: no trace file"
fi
