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
// Ring slots of three cache lines. A record takes one slot, or two when its
// memory ranges need more than the first slot's tail (Record). 256-byte slots
// with a 168-byte record left each slot's fourth line unwritten, but the
// hardware's adjacent-line prefetch fetched it anyway: two threads writing
// records made 1.63-1.72x one thread's records/s with 256-byte slots, 1.83-1.91x
// with 192 (bench_threads' RING_MB, paired runs, 2-vCPU AMD EPYC VM).
inline constexpr uint32_t kSlotSize = 192;
inline constexpr uint32_t kMaxRecordSlots = 2;

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
// A two-slot record takes positions pos and pos + 1 in one cmpxchg (both
// free), stores seq = pos + 2 in the second slot at once and commits the first
// last; its bytes run on from the first slot's, into one overhang slot past
// the ring's last (a ring is slots + 1 slots long), while the second
// position's seq stays in its own slot, which the record's layout leaves alone
// (Record::seq2 when the slots are neighbours).
// Rings are chosen by the CPU number rdtscp reports (TSC_AUX), so threads on
// different CPUs share no cache line; the cmpxchg keeps a thread preempted or
// migrated mid-hit correct.
struct Record {
  uint64_t seq;
  uint64_t stamp;   // rdtscp's TSC: orders records of different rings
  uint16_t tp_slot; // index into the TpSlot table
  uint16_t slots;   // slots the record takes: 1 or 2 (untrusted: checked)
  // Bit i set: the tracepoint's i-th memory range could not be read (the read
  // faulted and the stub's fault fixup sent the pad to its recovery code).
  uint32_t mem_unreadable;
  // The registers at the site, in push order: r15 r14 r13 r12 r11 r10 r9 r8
  // rbp rdi rsi rdx rcx rbx rax rflags, then rsp and rip.
  uint64_t regs[18];
  // The tracepoint's memory ranges, packed in action order (emit_memory_block):
  // in a one-slot record the first slot's last 24 bytes; in a two-slot record
  // from record_mem_offset(2), after the second slot's seq word.
  uint8_t one_slot_mem[kSlotSize - 24 - 8 * 18];
  uint64_t seq2;
  uint8_t two_slot_mem[kSlotSize - 8];
};
static_assert(sizeof(Record) == kMaxRecordSlots * kSlotSize);
static_assert(offsetof(Record, seq2) == kSlotSize);
inline constexpr size_t kRecordRegsOffset = offsetof(Record, regs);
// The most memory a record holds (plan_actions): the pad's copies address it
// with 8-bit displacements from the range's start.
inline constexpr size_t kRecordMemBytes = 128;
static_assert(kRecordMemBytes <= sizeof(Record::two_slot_mem));
inline constexpr uint32_t kMaxMemRanges = 32; // bits of mem_unreadable

// Slots of a record holding MEM_BYTES of memory ranges.
constexpr uint32_t record_slots(size_t mem_bytes) {
  return mem_bytes <= sizeof(Record::one_slot_mem) ? 1 : 2;
}
// Where the memory ranges start in a record of SLOTS slots.
constexpr size_t record_mem_offset(uint32_t slots) {
  return slots == 1 ? offsetof(Record, one_slot_mem) : offsetof(Record, two_slot_mem);
}
// A record's memory ranges (its slots as the stub checked them).
inline const uint8_t* record_mem(const Record& r) {
  return reinterpret_cast<const uint8_t*>(&r) + record_mem_offset(r.slots);
}
// One ring's bytes: its slots and the overhang slot.
constexpr uint64_t ring_stride(uint32_t slots) {
  return (uint64_t(slots) + 1) * kSlotSize;
}

// The area's guard word (offset kGuardOffset): nonzero only while the stub,
// the tracee's ptracer, lives to fix up a pad's faulting read. Memory-reading
// pads read nothing when it is 0. The kernel zeroes it when the stub's tracer
// thread exits, whatever kills it (it is that thread's clear_child_tid), before
// it detaches the tracees (docs/collectors.md "Jump pad": stub death).
inline constexpr uint64_t kGuardOffset = 0x800;

} // namespace gdbtrace::jumppad
