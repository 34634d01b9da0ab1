// `monitor gdbtrace stacks on [BYTES]`: what the engine adds to every
// tracepoint's actions so each hit also records the registers and BYTES of
// stack from $sp. They are ordinary 'R' and 'M' actions, so every collector
// (ptrace, eBPF, the kernel module) records them as ordinary tfile blocks and
// tsave / target tfile keep working; the unwinder (unwind/) reads them back.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "trace/tracepoint.h"

namespace gdbtrace {

constexpr uint32_t kDefaultStackBytes = 8192;
constexpr uint32_t kMinStackBytes = 256;
constexpr uint32_t kMaxStackBytes = 65536;

// BYTES as the user gave it, checked against the limits above.
Result<uint32_t> check_stack_bytes(uint64_t bytes);

// TP with the stack snapshot added: an 'R' action unless TP already collects
// registers, then the stack as several 'M' actions of at most a few hundred
// bytes at $sp+0, $sp+N, ... Near the top of the stack, where $sp+BYTES runs
// past the end of the mapping, the pieces past it are left out and the one
// that crosses it is kept up to it (ptrace and the module: up to the first
// fault; eBPF: up to the page boundary, bpf_codegen's stack_piece), so the
// snapshot ends at the mapping's end and never holds bytes that were not
// read. Step actions are left alone.
Tracepoint with_stack_actions(const Tracepoint& tp, uint32_t bytes);

// The size of one piece for a snapshot of BYTES (at most 32 pieces: the
// module takes 64 actions per probe, and gdb's own need room too).
uint32_t stack_piece_size(uint32_t bytes);

} // namespace gdbtrace
