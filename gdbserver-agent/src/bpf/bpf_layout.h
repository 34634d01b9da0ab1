// Layout of the maps shared by the generated BPF programs and the collector.
//
// control: ARRAY with one big value (mmapped by the collector, addressed
//          directly by the programs through BPF_PSEUDO_MAP_VALUE), one
//          ControlSlot per installed tracepoint.
// tsvs:    ARRAY with one value of kMaxTsvs i64 (also mmapped).
// stats:   PERCPU_ARRAY, one StatsSlot per tracepoint (hits without a pass
//          count, drops, errors).
// rings:   ARRAY_OF_MAPS of one RINGBUF per CPU (bpf_rings.h) holding stamped
//          records: finished frames in tfile layout, or ErrorRecords.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gdbtrace::bpf {

// Slots per run (one ControlSlot and one StatsSlot each; the last slot is the
// run's, see kGlobalSlot). 65536 ControlSlots are 4 MB, the largest value the
// kernel's array maps take (KMALLOC_MAX_SIZE); the maps are made once, and only
// the slots a run uses are touched. In practice the open-file limit binds
// first: every tracepoint holds an fd (common/open_file_limit.h).
constexpr uint32_t kMaxProbes = 65536;
constexpr uint32_t kMaxTsvs = 512;

struct ControlSlot {
  uint64_t enabled; // written by the collector (set_enabled)
  uint64_t hits;    // atomic fetch-add in the program (condition true)
  int64_t last_error;
  uint64_t last_error_pc;
  uint64_t skips_pending; // threads that sat at the address when the probe was installed
  // 1: this program emulates the probed instruction (bpf_emulate.h); set by the
  // collector for the last program the kernel runs at the address only.
  uint64_t emulate;
  // Frames of this probe the full ring dropped, added to by the drop path
  // (rare) so that the collector reads every probe's drops from the mapped
  // map, without a system call per probe. In the global slot: the run's stop
  // flag (kStopFlagOffset).
  uint64_t drops;
  // This slot's index and tracepoint, written by the collector: a program
  // shared by many probes (CodegenOptions::slot_from_cookie) reads them here.
  uint32_t slot;
  uint32_t tp_number;
};
static_assert(sizeof(ControlSlot) == 64);

// The last control slot belongs to no tracepoint: its `drops` is the
// run's stop flag. The program whose hit reaches a pass count sets it, so every
// tracepoint stops collecting at that hit (gdbserver stops the run inside the
// hit) instead of when the stub gets round to removing the probes.
constexpr uint32_t kGlobalSlot = kMaxProbes - 1;
constexpr uint32_t kStopFlagOffset =
    kGlobalSlot * sizeof(ControlSlot) + offsetof(ControlSlot, drops);
// Its `hits` counts the frames every probe dropped (ring full), so the
// collector reads the per-probe drop counts only when it moved.
constexpr uint32_t kDropCountOffset =
    kGlobalSlot * sizeof(ControlSlot) + offsetof(ControlSlot, hits);
// Its `enabled` is 1 while the stub defers draining (a linear run on a machine
// with no idle CPU, bpf_collector_records.cc): a frame in a first ring then wakes
// nobody, and a frame in an overflow ring wakes the stub only when it takes that
// ring past half full (else every overflow frame wakes it: it is behind).
constexpr uint32_t kDeferWakeOffset =
    kGlobalSlot * sizeof(ControlSlot) + offsetof(ControlSlot, enabled);

struct StatsSlot {
  uint64_t hits;     // hits of a tracepoint without a pass count (else ControlSlot::hits)
  uint64_t drops;    // ring buffer full: frame not written
  uint64_t errors;   // agent-expression errors at run time
  uint64_t emulated; // hits whose instruction the program emulated (bpf_emulate.h)
};

// Key of the skip map: a thread stopped exactly at a tracepoint's address when
// the probe went in has already "passed" it for gdb (it steps over breakpoints
// at the pc it resumes from), but the uprobe would fire: its first hit is skipped.
inline uint64_t skip_key(uint32_t tid, uint32_t slot) {
  return (uint64_t(tid) << 32) | slot;
}
constexpr uint32_t kMaxSkips = 4096;

// After its stamp (bpf_rings.h), every record holds the slot of the probe that
// wrote it (u64; a frame names only its tracepoint number, and a number has a
// probe per location), then the frame or ErrorRecord.
constexpr uint32_t kRecordSlot = 8;

// A ring-buffer record that is not a frame: u16 marker instead of a tracepoint number.
constexpr uint16_t kErrorMarker = 0xffff;
struct __attribute__((packed)) ErrorRecord {
  uint16_t marker; // kErrorMarker
  uint32_t size;   // bytes after this field
  uint32_t tp_number;
  int32_t status; // ax_status
  uint32_t pc;    // bytecode offset of the failing instruction
  uint32_t in_condition;
};

// Bytes a `trace` with a length computed at run time may collect (the frame
// reserves this much; a longer request fails with AX_ERR_TRACE).
constexpr uint32_t kDynamicTraceMax = 4096;
// Largest frame a tracepoint may need (the ring-buffer reservation).
constexpr uint32_t kMaxFrameSize = 256 * 1024;

} // namespace gdbtrace::bpf
