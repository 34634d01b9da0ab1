// The eBPF collector's ring records -> tfile frames (bpf_record.h): a compact
// register block becomes the 'R' block FrameBuilder would write, other blocks
// are copied, and a damaged record is refused rather than half expanded.
#include <gtest/gtest.h>

#include "abi/amd64_regs.h"
#include "bpf/bpf_record.h"
#include "trace/frame.h"

namespace gdbtrace::bpf {
namespace {

constexpr uint32_t kRegBlock = GT_REGBLOCK_SIZE_AVX;

// A record as a program writes it: header, compact block of VALUES, 'M', 'V'.
std::vector<uint8_t> record(uint16_t tp, const std::vector<uint64_t>& values) {
  std::vector<uint8_t> r;
  put_le<uint16_t>(r, tp);
  put_le<uint32_t>(r, 0);
  r.push_back(kCompactRegsTag);
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

TEST(BpfRecord, CompactRegistersExpandToTheTfileBlock) {
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
  ASSERT_TRUE(expand_record(rec, regs, kRegBlock, out));
  EXPECT_EQ(out, std::vector<uint8_t>(want_bytes.begin(), want_bytes.end()));
  FrameView view(out, kRegBlock);
  EXPECT_EQ(view.tp_number(), 4);
  EXPECT_TRUE(view.for_each([](const FrameBlock&) { return true; }));
}

TEST(BpfRecord, NoAvxBlockKeepsWhatFits) {
  auto regs = CompactRegisters::of({GT_RAX, GT_FS_BASE});
  auto rec = record(1, {5, 6});
  std::vector<uint8_t> out;
  ASSERT_TRUE(expand_record(rec, regs, GT_REGBLOCK_SIZE_NOAVX, out));
  FrameView view(out, GT_REGBLOCK_SIZE_NOAVX);
  auto r = view.registers();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->length, GT_REGBLOCK_SIZE_NOAVX);
  EXPECT_EQ(get_le<uint64_t>(r->data + gt_reg_offset(GT_RAX)), 5u);
}

TEST(BpfRecord, DamagedRecordsAreRefused) {
  auto regs = CompactRegisters::of({GT_RAX, GT_RIP});
  auto good = record(2, {1, 2});
  std::vector<uint8_t> out;
  ASSERT_TRUE(expand_record(good, regs, kRegBlock, out));

  // Every truncation of the blocks (header size field kept) and every prefix.
  for (size_t cut = 0; cut < good.size(); cut++) {
    std::vector<uint8_t> r(good.begin(), good.begin() + long(cut));
    EXPECT_FALSE(expand_record(r, regs, kRegBlock, out)) << "prefix " << cut;
  }
  // A size field claiming less than the blocks hold cuts a block in two.
  auto shorter = good;
  uint32_t n = uint32_t(good.size() - GT_TFRAME_HEADER_SIZE - 3);
  std::memcpy(shorter.data() + GT_TFRAME_SIZE_OFFSET, &n, 4);
  EXPECT_FALSE(expand_record(shorter, regs, kRegBlock, out));
  // A compact block of another program's register count.
  EXPECT_FALSE(expand_record(good, CompactRegisters::of({GT_RAX, GT_RIP, GT_RBX, GT_RCX, GT_RDX}),
                             kRegBlock, out));
  // Unknown tags, and a full 'R' block (programs never write one).
  for (uint8_t tag : {uint8_t(0), uint8_t('X'), uint8_t(GT_TFRAME_REGS)}) {
    auto bad = good;
    bad[GT_TFRAME_HEADER_SIZE] = tag;
    EXPECT_FALSE(expand_record(bad, regs, kRegBlock, out)) << "tag " << int(tag);
  }
}

} // namespace
} // namespace gdbtrace::bpf
