// Compact trace frames: a tfile frame (abi/tframe.h) whose register blocks
// hold only the registers a collector really filled.
//
// A compact register block is the tag GT_TFRAME_COMPACT_REGS, then one slot
// per register of a CompactRegisters layout, in its order: a u64 for a
// register of 8 bytes or less (its value zero-extended), the register's own
// bytes for a wider one (x87, SSE, AVX). Two owners write it:
//  - the eBPF program (bpf/bpf_codegen.cc) in its ring records: every record
//    byte is a cache line written on the hit's CPU and read on the stub's, and
//    the full 816-byte block made a `collect $regs, *p` record 14 lines, the
//    compact one 4 (bench/threads.sh);
//  - the trace buffer (trace_buffer.h), which keeps those records as they are
//    and stores the 'R' blocks of other frames whose registers are partly
//    unavailable this way, so the same buffer holds several times more
//    register-only frames.
// Everything that hands a frame to gdb, a file or the plugin expands it first
// (expand_frame): the registers at their 'g' offsets, zeros elsewhere, which
// are the bytes a kernel collector's full block holds there.
#pragma once

#include <bitset>
#include <cstdint>
#include <span>
#include <vector>

#include "abi/amd64_regs.h"

namespace gdbtrace {

// A set of registers by remote number (bit r: register r), cheap to compare
// per frame (a std::vector<bool> compares bit by bit).
using RegisterMask = std::bitset<GT_NUM_REGS_AVX>;
RegisterMask register_mask(const std::vector<bool>& held);

// Where each slot of a compact block goes in the 'R' block.
struct CompactRegisters {
  struct Slot {
    uint16_t offset; // in the register block (abi/amd64_regs.h gt_reg_offset)
    uint8_t size;    // bytes of the register
    uint8_t stride;  // bytes of its slot: 8, or size when wider
  };
  std::vector<Slot> slots; // in block order

  CompactRegisters() {
    for (auto& at : slot_at_)
      at = -1;
  }

  // REGNUMS: remote register numbers, in the order the block holds them.
  static CompactRegisters of(const std::vector<unsigned>& regnums);
  // The registers of HELD, in register-number order.
  static CompactRegisters of_mask(const RegisterMask& held);
  uint32_t block_size() const { return block_size_; } // tag included
  // Where register REGNUM's slot starts in a block's data (after the tag); -1: not held.
  // A table lookup: the engine reads each frame's pc with it.
  int slot_offset(unsigned regnum) const {
    return regnum < GT_NUM_REGS_AVX ? slot_at_[regnum] : -1;
  }

private:
  uint32_t block_size_ = 1;
  int16_t slot_at_[GT_NUM_REGS_AVX];
};

// Replaces OUT with the tfile frame of COMPACT, whose compact blocks REGS
// describes and whose 'R' blocks hold REGBLOCK_SIZE bytes. False (OUT
// unspecified) when COMPACT does not parse: a block runs past its end or has
// an unknown tag ('R' included: a compact frame has none).
bool expand_frame(std::span<const uint8_t> compact, const CompactRegisters& regs,
                  uint32_t regblock_size, std::vector<uint8_t>& out);

// Appends to OUT the compact form of FRAME (a well-formed tfile frame whose
// 'R' blocks hold REGBLOCK_SIZE bytes): each 'R' block becomes a compact block
// of REGS, other blocks are copied. compact_size() says how long it will be.
void compact_frame(std::span<const uint8_t> frame, const CompactRegisters& regs,
                   uint32_t regblock_size, uint8_t* out);
size_t compact_size(size_t frame_size, size_t register_blocks, const CompactRegisters& regs,
                    uint32_t regblock_size);

} // namespace gdbtrace
