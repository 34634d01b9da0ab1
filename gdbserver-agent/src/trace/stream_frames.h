// Frames as a streamed file holds them (trace_stream.h): each register block
// cut down to the registers every frame of the run holds, in 'g' order, as
// `tsave -r` writes them (trace_save.cc), so gdb shows the others as
// <unavailable> instead of zeros. An eBPF `collect $regs` frame is then ~210
// bytes in the file instead of 823: the file write was most of the stub's CPU
// per streamed frame.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/register_layout.h"
#include "trace/compact_frame.h"

namespace gdbtrace {

// Where each register of the file's block comes from in one stored layout.
struct CutPlan {
  struct Copy {
    int32_t from; // offset in the stored block's data; -1: not held there (zeros)
    uint16_t to;  // offset in the file's block
    uint16_t size;
  };
  std::vector<Copy> copies;
  uint32_t in_size = 0; // bytes of a stored register block, tag included
  bool compact = false; // the stored blocks are compact ('r'), else 'R'

  // PRESENT: the file's registers (remote numbers of REGS, the process's
  // layout). LAYOUT: the stored compact layout, or null for full 'R' blocks of
  // REGBLOCK_SIZE bytes.
  static CutPlan make(const std::vector<bool>& present, const CompactRegisters* layout,
                      const RegisterLayout& regs, uint32_t regblock_size);
};

// Appends to OUT the stored frame STORED (well formed: the buffer wrote it)
// with each register block written as the CUT_SIZE-byte block PLAN makes.
void append_cut_frame(std::span<const uint8_t> stored, const CutPlan& plan, uint32_t cut_size,
                      std::vector<uint8_t>& out);

} // namespace gdbtrace
