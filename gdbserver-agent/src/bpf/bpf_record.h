// A record of the eBPF collector's ring buffers, and the tfile frame it becomes.
//
// A record (after its stamp, bpf_rings.h) is a frame in gdb's tfile layout
// (abi/tframe.h) except for one block: the registers travel compactly. The
// program writes kCompactRegsTag and then one u64 per register a uprobe can
// read, in the order of CompactRegisters, instead of the 816-byte 'R' block
// whose x87/SSE/AVX part it cannot fill. Every record byte is a cache line
// written on the hit's CPU and read on the stub's: the full block made a
// `collect $regs, *p` record 14 lines, the compact one 4, which is most of the
// hit's and the drain's cost per frame and what kept two threads from scaling
// (bench/threads.sh). The collector expands the block before the frame reaches
// the engine, so the trace buffer still holds tfile frames only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace gdbtrace::bpf {

constexpr uint8_t kCompactRegsTag = 'r';

// Where each u64 of a compact block goes in the 'R' block.
struct CompactRegisters {
  struct Slot {
    uint16_t offset; // in the register block (abi/amd64_regs.h gt_reg_offset)
    uint8_t size;    // bytes kept: the low ones of the u64
  };
  std::vector<Slot> slots; // in record order

  // REGNUMS: remote register numbers, in the order the program writes them.
  static CompactRegisters of(const std::vector<unsigned>& regnums);
  uint32_t block_size() const { return 1 + 8 * uint32_t(slots.size()); } // tag included
};

// Replaces OUT with the tfile frame of RECORD, whose compact blocks REGS
// describes and whose 'R' blocks hold REGBLOCK_SIZE bytes. False (OUT
// unspecified) when RECORD does not parse: a block runs past its end or has an
// unknown tag.
bool expand_record(std::span<const uint8_t> record, const CompactRegisters& regs,
                   uint32_t regblock_size, std::vector<uint8_t>& out);

} // namespace gdbtrace::bpf
