// Compact frames (trace/compact_frame.h), as eBPF ring records and the trace
// buffer hold them -> tfile frames: a compact register block becomes the 'R'
// block FrameBuilder would write, other blocks are copied, a damaged frame is
// refused rather than half expanded, and compacting a tfile frame is undone
// exactly by expanding it.
#include <gtest/gtest.h>

#include "abi/amd64_regs.h"
#include "trace/compact_frame.h"
#include "trace/frame.h"
#include "trace/stream_frames.h"

namespace gdbtrace {
namespace {

constexpr uint32_t kRegBlock = GT_REGBLOCK_SIZE_AVX;

// A record as a program writes it: header, compact block of VALUES, 'M', 'V'.
std::vector<uint8_t> record(uint16_t tp, const std::vector<uint64_t>& values) {
  std::vector<uint8_t> r;
  put_le<uint16_t>(r, tp);
  put_le<uint32_t>(r, 0);
  r.push_back(GT_TFRAME_COMPACT_REGS);
  for (uint64_t v : values)
    put_le<uint64_t>(r, v);
  r.push_back(GT_TFRAME_MEM);
  put_le<uint64_t>(r, 0x601000);
  put_le<uint16_t>(r, 3);
  r.insert(r.end(), {1, 2, 3});
  r.push_back(GT_TFRAME_TSV);
  put_le<uint32_t>(r, 7);
  put_le<int64_t>(r, -5);
  uint32_t n = uint32_t(r.size() - GT_TFRAME_HEADER_SIZE);
  std::memcpy(r.data() + GT_TFRAME_SIZE_OFFSET, &n, 4);
  return r;
}

TEST(CompactFrame, CompactRegistersExpandToTheTfileBlock) {
  auto regs = CompactRegisters::of({GT_RAX, GT_RIP, GT_EFLAGS, GT_CS, GT_FS_BASE});
  auto rec = record(4, {0x1111222233334444, 0x401000, 0xffffffff00000246, 0x33, 0x7f0012345678});

  std::vector<uint8_t> block(kRegBlock, 0);
  auto put = [&](unsigned r, uint64_t v) {
    std::memcpy(block.data() + gt_reg_offset(r), &v, gt_reg_size(r));
  };
  put(GT_RAX, 0x1111222233334444);
  put(GT_RIP, 0x401000);
  put(GT_EFLAGS, 0x246); // 4 bytes: the program's zero-extended u64, low half
  put(GT_CS, 0x33);
  put(GT_FS_BASE, 0x7f0012345678);
  FrameBuilder want(4);
  want.add_registers(block);
  want.add_memory(0x601000, std::vector<uint8_t>{1, 2, 3});
  want.add_tsv(7, -5);
  auto want_bytes = want.finish();

  std::vector<uint8_t> out{9, 9, 9}; // replaced, not appended to
  ASSERT_TRUE(expand_frame(rec, regs, kRegBlock, out));
  EXPECT_EQ(out, std::vector<uint8_t>(want_bytes.begin(), want_bytes.end()));
  FrameView view(out, kRegBlock);
  EXPECT_EQ(view.tp_number(), 4);
  EXPECT_TRUE(view.for_each([](const FrameBlock&) { return true; }));
}

TEST(CompactFrame, NoAvxBlockKeepsWhatFits) {
  auto regs = CompactRegisters::of({GT_RAX, GT_FS_BASE});
  auto rec = record(1, {5, 6});
  std::vector<uint8_t> out;
  ASSERT_TRUE(expand_frame(rec, regs, GT_REGBLOCK_SIZE_NOAVX, out));
  FrameView view(out, GT_REGBLOCK_SIZE_NOAVX);
  auto r = view.registers();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->length, GT_REGBLOCK_SIZE_NOAVX);
  EXPECT_EQ(get_le<uint64_t>(r->data + gt_reg_offset(GT_RAX)), 5u);
}

TEST(CompactFrame, DamagedRecordsAreRefused) {
  auto regs = CompactRegisters::of({GT_RAX, GT_RIP});
  auto good = record(2, {1, 2});
  std::vector<uint8_t> out;
  ASSERT_TRUE(expand_frame(good, regs, kRegBlock, out));

  // Every truncation of the blocks (header size field kept) and every prefix.
  for (size_t cut = 0; cut < good.size(); cut++) {
    std::vector<uint8_t> r(good.begin(), good.begin() + long(cut));
    EXPECT_FALSE(expand_frame(r, regs, kRegBlock, out)) << "prefix " << cut;
  }
  // A size field claiming less than the blocks hold cuts a block in two.
  auto shorter = good;
  uint32_t n = uint32_t(good.size() - GT_TFRAME_HEADER_SIZE - 3);
  std::memcpy(shorter.data() + GT_TFRAME_SIZE_OFFSET, &n, 4);
  EXPECT_FALSE(expand_frame(shorter, regs, kRegBlock, out));
  // A compact block of another program's register count.
  EXPECT_FALSE(expand_frame(good, CompactRegisters::of({GT_RAX, GT_RIP, GT_RBX, GT_RCX, GT_RDX}),
                            kRegBlock, out));
  // Unknown tags, and a full 'R' block (programs never write one).
  for (uint8_t tag : {uint8_t(0), uint8_t('X'), uint8_t(GT_TFRAME_REGS)}) {
    auto bad = good;
    bad[GT_TFRAME_HEADER_SIZE] = tag;
    EXPECT_FALSE(expand_frame(bad, regs, kRegBlock, out)) << "tag " << int(tag);
  }
}

// A tfile frame as a kernel collector writes it: the held registers set, the
// others zero, around memory and a TSV; and a second 'R' block (`collect
// $regs` twice).
std::vector<uint8_t> tfile_frame(const std::vector<bool>& held, uint32_t regblock) {
  std::vector<uint8_t> block(regblock, 0);
  for (unsigned r = 0; r < held.size(); r++)
    if (held[r] && gt_reg_offset(r) + gt_reg_size(r) <= regblock)
      for (unsigned i = 0; i < gt_reg_size(r); i++)
        block[gt_reg_offset(r) + i] = uint8_t(r * 7 + i + 1);
  FrameBuilder f(3);
  f.add_registers(block);
  f.add_memory(0x7ffc0000, std::vector<uint8_t>(40, 0xab));
  f.add_tsv(1, 123456789);
  f.add_registers(block);
  auto bytes = f.finish();
  return {bytes.begin(), bytes.end()};
}

TEST(CompactFrame, CompactingThenExpandingGivesTheSameBytes) {
  // What eBPF fills (general registers, rip, eflags, segments, fs_base), and
  // what the module fills with its FPU state (x87, SSE, AVX upper halves).
  std::vector<bool> ebpf(GT_NUM_REGS_AVX, false), module(GT_NUM_REGS_AVX, true);
  for (unsigned r = 0; r <= GT_GS; r++)
    ebpf[r] = true;
  ebpf[GT_FS_BASE] = true;
  module[GT_ORIG_RAX] = false;
  for (uint32_t regblock : {GT_REGBLOCK_SIZE_AVX, GT_REGBLOCK_SIZE_NOAVX})
    for (const auto* held : {&ebpf, &module}) {
      auto frame = tfile_frame(*held, regblock);
      auto regs = CompactRegisters::of_mask(register_mask(*held));
      std::vector<uint8_t> compact(compact_size(frame.size(), 2, regs, regblock));
      compact_frame(frame, regs, regblock, compact.data());
      EXPECT_EQ(gt_tframe_size(compact.data()), compact.size() - GT_TFRAME_HEADER_SIZE);
      std::vector<uint8_t> out;
      ASSERT_TRUE(expand_frame(compact, regs, regblock, out));
      EXPECT_EQ(out, frame) << "regblock " << regblock;
    }
  // eBPF's set in the 816-byte block: a quarter of the frame.
  auto regs = CompactRegisters::of_mask(register_mask(ebpf));
  EXPECT_EQ(regs.block_size(), 1u + 8 * 25);
}

// A streamed frame's register block (stream_frames.h) is the file's registers
// one after the other, each from its compact slot or zeros when the frame does
// not hold it; the plan copies runs of neighbours at once, with the same bytes.
TEST(CompactFrame, CutBlockMatchesRegisterByRegisterCopy) {
  std::vector<unsigned> held;
  for (unsigned r = GT_RAX; r <= GT_GS; r++)
    if (r != GT_RBX && r != GT_CS) // a gap in the middle of each run
      held.push_back(r);
  held.push_back(GT_ORIG_RAX);
  held.push_back(GT_FS_BASE);
  auto regs = CompactRegisters::of(held);
  std::vector<uint64_t> values;
  for (unsigned r : held)
    values.push_back(0x1111111111111111ull * (r % 15 + 1) + r);
  auto rec = record(6, values);

  RegisterLayout layout; // amd64, no AVX
  std::vector<bool> present(layout.count(), false);
  for (unsigned r = GT_RAX; r <= GT_GS; r++)
    present[r] = true; // rbx and cs too: zeros in the cut block
  present[GT_ORIG_RAX] = present[GT_FS_BASE] = present[GT_FS_BASE + 1] = true;

  std::vector<uint8_t> want_block;
  for (unsigned r = 0; r < present.size(); r++) {
    if (!present[r])
      continue;
    int at = regs.slot_offset(r);
    for (unsigned i = 0; i < layout.size(r); i++)
      want_block.push_back(at < 0 ? 0 : rec[GT_TFRAME_HEADER_SIZE + 1 + size_t(at) + i]);
  }
  FrameBuilder want(6);
  want.add_registers(want_block);
  want.add_memory(0x601000, std::vector<uint8_t>{1, 2, 3});
  want.add_tsv(7, -5);
  auto want_bytes = want.finish();

  CutPlan plan = CutPlan::make(present, &regs, layout, layout.bytes());
  EXPECT_LT(plan.copies.size(), held.size() / 2); // runs, not one copy per register
  std::vector<uint8_t> out{9};                    // appended to
  append_cut_frame(rec, plan, uint32_t(want_block.size()), out);
  ASSERT_EQ(out.size(), 1 + want_bytes.size());
  EXPECT_EQ(std::vector<uint8_t>(out.begin() + 1, out.end()),
            std::vector<uint8_t>(want_bytes.begin(), want_bytes.end()));
}

} // namespace
} // namespace gdbtrace
