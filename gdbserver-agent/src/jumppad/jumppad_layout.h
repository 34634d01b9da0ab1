// The jump pad's shared memory: one memfd per traced process, mapped by the
// stub and, by injected system calls, by the tracee within +-2 GB of its
// tracepoint sites (so a 5-byte jmp reaches the pad and the pad's rip-relative
// operands reach everything here).
//
// The tracee writes the counters, the TSVs and the rings; the stub reads them
// as untrusted input (docs/collectors.md "Jump pad": trust model).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gdbtrace::jumppad {

// Offsets in the area. The tracee maps [0, kCodeOffset) and [kRingOffset, end)
// read-write, [kCodeOffset, kRingOffset) read-execute.
inline constexpr uint64_t kTpSlotsOffset = 0x1000; // TpSlot[kMaxTpSlots]
inline constexpr uint32_t kMaxTpSlots = 4096;
inline constexpr uint64_t kTsvOffset = kTpSlotsOffset + 32 * kMaxTpSlots; // int64_t[kMaxTsvs]
inline constexpr uint32_t kMaxTsvs = 512;
inline constexpr uint64_t kRingHeadsOffset = kTsvOffset + 8 * kMaxTsvs; // RingHead[kMaxRings]
inline constexpr uint32_t kMaxRings = 128;
inline constexpr uint64_t kCodeOffset = 0x40000;
inline constexpr uint64_t kCodeSize = 0x40000;
inline constexpr uint64_t kRingOffset = kCodeOffset + kCodeSize;
inline constexpr uint32_t kSlotShift = 8; // 256-byte ring slots
inline constexpr uint32_t kSlotSize = 1u << kSlotShift;

static_assert(kRingHeadsOffset + 64 * kMaxRings <= kCodeOffset);

// One tracepoint location's counters and switch (a "tp slot"). A slot never
// serves another site while the area exists: a thread still inside an old pad
// (preempted there at tstop) only ever touches its own site's slot, which a
// later run at that site takes again (the stub discards the rings' records
// left from between runs when a run starts).
struct TpSlot {
  uint64_t hits;    // hits that passed the enabled check, of a pad writing no records
  uint64_t drops;   // records lost to a full ring
  uint32_t enabled; // the stub's switch: 0 = the pad skips this tracepoint
  uint32_t reserved;
  uint64_t reserved2;
};
static_assert(sizeof(TpSlot) == 32);

// The producer's position in one ring (one cache line each).
struct RingHead {
  uint64_t head; // next reservation (lock cmpxchg by the pads)
  uint64_t reserved[7];
};
static_assert(sizeof(RingHead) == 64);

// A ring is a bounded multi-producer queue of kSlotSize slots (Vyukov's): a
// slot whose seq equals the reservation position is free; the pad takes it by
// moving the head on with cmpxchg, writes the record, then stores seq = pos + 1
// (committed). The stub consumes position t when seq == t + 1 and frees it with
// seq = t + nslots. A producer that finds seq < pos (the ring is full) drops.
// Rings are chosen by the CPU number rdtscp reports (TSC_AUX), so threads on
// different CPUs share no cache line; the cmpxchg keeps a thread preempted or
// migrated mid-hit correct.
struct Record {
  uint64_t seq;
  uint64_t stamp;   // rdtscp's TSC: orders records of different rings
  uint32_t tp_slot; // index into the TpSlot table
  // Bit i set: the tracepoint's i-th memory range could not be read (the read
  // faulted and the stub's fault fixup sent the pad to its recovery code).
  uint32_t mem_unreadable;
  // The registers at the site, in push order: r15 r14 r13 r12 r11 r10 r9 r8
  // rbp rdi rsi rdx rcx rbx rax rflags, then rsp and rip.
  uint64_t regs[18];
  // The tracepoint's memory ranges, packed in action order (emit_memory_block).
  uint8_t mem[kSlotSize - 24 - 8 * 18];
};
static_assert(sizeof(Record) == kSlotSize);
inline constexpr size_t kRecordRegsOffset = offsetof(Record, regs);
inline constexpr size_t kRecordMemOffset = offsetof(Record, mem);
inline constexpr size_t kRecordMemBytes = sizeof(Record::mem);
inline constexpr uint32_t kMaxMemRanges = 32; // bits of mem_unreadable

// The area's guard word (offset kGuardOffset): nonzero only while the stub,
// the tracee's ptracer, lives to fix up a pad's faulting read. Memory-reading
// pads read nothing when it is 0. The kernel zeroes it when the stub's tracer
// thread exits, whatever kills it (it is that thread's clear_child_tid), before
// it detaches the tracees (docs/collectors.md "Jump pad": stub death).
inline constexpr uint64_t kGuardOffset = 0x800;

} // namespace gdbtrace::jumppad
