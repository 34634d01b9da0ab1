#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <random>

#include "abi/amd64_regs.h"
#include "trace/frame.h"
#include "trace/trace_buffer.h"

using namespace gdbtrace;

TEST(FrameLayout, BytesAsGdbReadsThem) {
  FrameBuilder f(0x0102);
  uint8_t regs[4] = {0xa0, 0xa1, 0xa2, 0xa3};
  f.add_registers(regs);
  uint8_t mem[3] = {0x11, 0x22, 0x33};
  f.add_memory(0x0000123456789abcull, mem);
  f.add_tsv(7, -2);
  auto bytes = f.finish();
  // Hand-computed: u16 tp, u32 size, 'R'+4, 'M'+u64+u16+3, 'V'+u32+i64.
  std::vector<uint8_t> want = {0x02, 0x01,                   // tracepoint 0x0102
                               0x20, 0x00, 0x00, 0x00,       // 5 + 14 + 13 = 32 bytes of blocks
                               'R',  0xa0, 0xa1, 0xa2, 0xa3, // registers
                               'M',  0xbc, 0x9a, 0x78, 0x56, 0x34, 0x12, 0x00, 0x00,
                               0x03, 0x00, 0x11, 0x22, 0x33, 'V',  0x07, 0x00, 0x00,
                               0x00, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.end()), want);

  FrameView view(bytes, 4);
  EXPECT_EQ(view.tp_number(), 0x0102);
  std::string kinds;
  ASSERT_TRUE(view.for_each([&](const FrameBlock& b) {
    kinds += b.type;
    if (b.type == 'M') {
      EXPECT_EQ(b.address, 0x123456789abcu);
      EXPECT_EQ(b.length, 3u);
    }
    if (b.type == 'V')
      EXPECT_EQ(b.value, -2);
    return true;
  }));
  EXPECT_EQ(kinds, "RMV");
}

TEST(FrameLayout, LongMemorySplitsIntoBlocks) {
  FrameBuilder f(1);
  std::vector<uint8_t> big(70000, 0x5a);
  f.add_memory(0x1000, big);
  auto bytes = f.finish();
  FrameView view(bytes, 0);
  std::vector<std::pair<uint64_t, uint32_t>> blocks;
  view.for_each([&](const FrameBlock& b) {
    blocks.emplace_back(b.address, b.length);
    return true;
  });
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0], std::make_pair(uint64_t(0x1000), uint32_t(65535)));
  EXPECT_EQ(blocks[1], std::make_pair(uint64_t(0x1000 + 65535), uint32_t(70000 - 65535)));
}

namespace {
// The whole frame stream, read as qTBuffer does (in pieces).
std::vector<uint8_t> stream_of(const TraceBuffer& buf, uint64_t offset = 0,
                               uint64_t length = UINT64_MAX) {
  std::vector<uint8_t> out;
  buf.read_stream(offset, length, [&](std::span<const uint8_t> piece) {
    out.insert(out.end(), piece.begin(), piece.end());
    return true;
  });
  return out;
}

std::vector<uint8_t> frame_at(const TraceBuffer& buf, long n) {
  std::vector<uint8_t> scratch;
  auto f = buf.frame(n, scratch);
  return {f.begin(), f.end()};
}

std::vector<uint8_t> frame_of(uint16_t tp, size_t payload) {
  FrameBuilder f(tp);
  std::vector<uint8_t> m(payload, uint8_t(tp));
  f.add_memory(0x100 * tp, m);
  auto s = f.finish();
  return {s.begin(), s.end()};
}
} // namespace

TEST(TraceBuffer, LinearFillsThenRefuses) {
  auto fr = frame_of(1, 10); // 6 + 11 + 10 = 27 bytes
  ASSERT_EQ(fr.size(), 27u);
  TraceBuffer buf(100);
  EXPECT_TRUE(buf.append(fr, 1, 0x401000));
  EXPECT_TRUE(buf.append(fr, 1, 0x401000));
  EXPECT_TRUE(buf.append(fr, 1, 0x401000));
  EXPECT_FALSE(buf.append(fr, 1, 0x401000)); // 81 used, 19 free
  EXPECT_EQ(buf.frame_count(), 3u);
  EXPECT_EQ(buf.used(), 81u);
  EXPECT_EQ(buf.free_bytes(), 19u);
  // The stream is the frames back to back.
  auto bytes = stream_of(buf);
  ASSERT_EQ(bytes.size(), 81u);
  EXPECT_EQ(buf.stream_size(), 81u);
  EXPECT_TRUE(std::equal(fr.begin(), fr.end(), bytes.begin() + 54));
}

TEST(TraceBuffer, CircularDiscardsOldest) {
  TraceBuffer buf(100);
  buf.set_circular(true);
  for (uint16_t tp = 1; tp <= 10; ++tp)
    ASSERT_TRUE(buf.append(frame_of(tp, 10), tp, 0x1000 + tp));
  EXPECT_EQ(buf.frame_count(), 3u);
  EXPECT_EQ(buf.frames_created(), 10u);
  EXPECT_EQ(buf.frames_discarded(), 7u);
  // Frame 0 is now tracepoint 8's frame, and the stream starts with it.
  EXPECT_EQ(buf.frame_tp(0), 8);
  EXPECT_EQ(stream_of(buf)[0], 8);
  auto f2 = frame_at(buf, 2);
  EXPECT_EQ(FrameView(f2, 0).tp_number(), 10);
  EXPECT_EQ(buf.find_tracepoint(9, -1), 1);
  EXPECT_EQ(buf.find_tracepoint(3, -1), -1); // discarded
  EXPECT_EQ(buf.find_pc(0x1000 + 10, -1), 2);
  // A frame bigger than the whole buffer never fits.
  EXPECT_FALSE(buf.append(frame_of(1, 200), 1, 0));
}

// A circular buffer keeps dropped frames' bytes in front of the live ones until
// an append would outgrow its run's reservation, then moves the live bytes
// down: across many such moves, and with the buffer made circular only after
// its reservation (the store then grows once instead), the newest frames read
// back intact and in order.
TEST(TraceBuffer, CircularFramesSurviveCompaction) {
  for (bool circular_first : {true, false}) {
    SCOPED_TRACE(circular_first ? "circular at the reservation" : "circular after it");
    TraceBuffer buf(64 << 10);
    if (circular_first)
      buf.set_circular(true);
    buf.reserve_for_run();
    buf.set_circular(true);
    const uint32_t n = 20000; // ~2.3 MB of frames through a 64 KB buffer
    for (uint32_t i = 0; i < n; ++i) {
      FrameBuilder f(1);
      f.add_memory(i, std::vector<uint8_t>(100, uint8_t(i * 7))); // address: the frame's number
      ASSERT_TRUE(buf.append(f.finish(), 1, 0x1000));
    }
    ASSERT_GT(buf.frame_count(), 500u);
    EXPECT_EQ(buf.frames_created(), n);
    EXPECT_EQ(buf.frames_discarded() + buf.frame_count(), n);
    for (size_t k = 0; k < buf.frame_count(); ++k) {
      auto f = frame_at(buf, long(k));
      size_t blocks = 0;
      ASSERT_TRUE(FrameView(f, 0).for_each([&](const FrameBlock& b) {
        const uint64_t i = n - buf.frame_count() + k;
        EXPECT_EQ(b.address, i) << "frame " << k;
        EXPECT_EQ(b.length, 100u);
        EXPECT_EQ(b.data[99], uint8_t(i * 7)) << "frame " << k;
        return ++blocks > 0;
      }));
      ASSERT_EQ(blocks, 1u);
    }
  }
}

TEST(TraceBuffer, ResizeClears) {
  TraceBuffer buf(100);
  ASSERT_TRUE(buf.append(frame_of(1, 10), 1, 0));
  buf.set_capacity(1000);
  EXPECT_EQ(buf.frame_count(), 0u);
  EXPECT_EQ(buf.capacity(), 1000u);
}

// Every lookup agrees with a linear scan, across circular wrap-around.
TEST(TraceBuffer, IndexMatchesLinearScan) {
  std::mt19937 rng(42);
  TraceBuffer buf(4000);
  buf.set_circular(true);
  std::vector<std::pair<uint16_t, uint64_t>> all; // every frame ever appended
  for (int i = 0; i < 600; ++i) {
    uint16_t tp = uint16_t(1 + rng() % 4);
    uint64_t pc = 0x400000 + (rng() % 12) * 4;
    ASSERT_TRUE(buf.append(frame_of(tp, rng() % 40), tp, pc));
    all.emplace_back(tp, pc);
  }
  size_t first = all.size() - buf.frame_count();
  auto scan = [&](auto pred, long after) -> long {
    for (size_t n = size_t(after + 1); n < buf.frame_count(); ++n)
      if (pred(all[first + n]))
        return long(n);
    return -1;
  };
  for (size_t n = 0; n < buf.frame_count(); ++n) {
    ASSERT_EQ(buf.frame_tp(long(n)), all[first + n].first);
    ASSERT_EQ(buf.frame_pc(long(n)), all[first + n].second);
  }
  for (long after = -1; after < long(buf.frame_count()); ++after) {
    for (uint16_t tp = 1; tp <= 5; ++tp)
      ASSERT_EQ(buf.find_tracepoint(tp, after),
                scan([&](auto& f) { return f.first == tp; }, after));
    uint64_t lo = 0x400000 + (rng() % 12) * 4, hi = lo + (rng() % 5) * 4;
    ASSERT_EQ(buf.find_range(lo, hi, true, after),
              scan([&](auto& f) { return f.second >= lo && f.second <= hi; }, after));
    ASSERT_EQ(buf.find_range(lo, hi, false, after),
              scan([&](auto& f) { return f.second < lo || f.second > hi; }, after));
    ASSERT_EQ(buf.find_pc(lo, after), scan([&](auto& f) { return f.second == lo; }, after));
  }
}

namespace {
long resident_kb() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f || std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2)
    pages_resident = -1;
  if (f)
    std::fclose(f);
  return pages_resident * (sysconf(_SC_PAGESIZE) / 1024);
}
} // namespace

// Appends prepare the reserved pages in batches ahead of the write position
// (one madvise instead of a page fault per page), but only a batch ahead: a
// 512 MB buffer that holds a few frames must not make the stub 512 MB larger.
// Frames written across many batches read back intact.
// QTStart prepares the first 64 MB (written once while the tracee is stopped),
// never the whole reservation.
TEST(TraceBuffer, PreparesTheFirstPagesAtStartOnly) {
  long before = resident_kb();
  ASSERT_GT(before, 0);
  TraceBuffer big(1024u << 20);
  big.reserve_for_run();
  long grown = resident_kb() - before;
  EXPECT_GE(grown, 60 * 1024) << "the first 64 MB were not prepared at start";
  EXPECT_LT(grown, 80 * 1024) << "start made far more than 64 MB of a 1 GB buffer resident";

  TraceBuffer small(1u << 20);
  before = resident_kb();
  small.reserve_for_run();
  EXPECT_LT(resident_kb() - before, 2 * 1024) << "a 1 MB buffer made more than itself resident";
  std::vector<uint8_t> frame(100, 0x5a);
  ASSERT_TRUE(small.append(frame, 2, 0x2000));
  EXPECT_EQ(frame_at(small, 0)[99], 0x5a);
}

TEST(TraceBuffer, PreparesPagesOnlyABatchAhead) {
  TraceBuffer buf(512u << 20);
  buf.reserve_for_run();
  std::vector<uint8_t> frame(823);
  // Fill what start prepared: writing it makes nothing more resident but the
  // frame index (~48 bytes a frame, ~4 MB here; more under ASan).
  long before = resident_kb();
  ASSERT_GT(before, 0);
  const size_t prepared = (64u << 20) / frame.size();
  for (size_t i = 0; i < prepared; ++i)
    ASSERT_TRUE(buf.append(frame, 1, 0x1000));
  EXPECT_LT(resident_kb() - before, 16 * 1024) << "the pages prepared at start were not kept";

  before = resident_kb();
  ASSERT_TRUE(buf.append(frame, 1, 0x1000));
  long after_one = resident_kb();
  EXPECT_LT(after_one - before, 16 * 1024) << "one frame made the buffer resident far ahead";
  EXPECT_GE(after_one - before, 1024) << "no batch (1 MB) of pages prepared ahead of the writes";

  // 40 MB of frames: forty batches, each frame with its own pattern.
  const size_t n = (40u << 20) / frame.size();
  for (size_t i = 1; i < n; ++i) {
    std::fill(frame.begin(), frame.end(), uint8_t(i * 31));
    ASSERT_TRUE(buf.append(frame, 1, 0x1000));
  }
  EXPECT_LT(resident_kb() - before, (40 + 16) * 1024);
  ASSERT_EQ(buf.frame_count(), prepared + n);
  for (size_t i : {size_t(1), n / 3, n / 2, n - 1}) {
    auto got = frame_at(buf, long(prepared + i));
    ASSERT_EQ(got.size(), frame.size());
    EXPECT_EQ(got[0], uint8_t(i * 31));
    EXPECT_EQ(got[frame.size() - 1], uint8_t(i * 31));
  }
}

namespace {
// What the eBPF collector fills: general registers, rip, eflags, segments, fs_base.
std::vector<bool> ebpf_registers() {
  std::vector<bool> held(GT_NUM_REGS_AVX, false);
  for (unsigned r = 0; r <= GT_GS; r++)
    held[r] = true;
  held[GT_FS_BASE] = true;
  return held;
}

// A `collect $rdi` frame as a kernel collector hands it over: the full 'R'
// block, zeros where it has no register; EXTRA bytes of memory after it.
std::vector<uint8_t> register_frame(uint16_t tp, uint64_t seed, size_t extra = 0) {
  std::vector<uint8_t> block(GT_REGBLOCK_SIZE_AVX, 0);
  auto held = ebpf_registers();
  for (unsigned r = 0; r < held.size(); r++)
    if (held[r])
      for (unsigned i = 0; i < gt_reg_size(r); i++)
        block[gt_reg_offset(r) + i] = uint8_t(seed * 13 + r * 7 + i + 1);
  FrameBuilder f(tp);
  f.add_registers(block);
  if (extra)
    f.add_memory(0x7ffd0000 + seed, std::vector<uint8_t>(extra, uint8_t(seed)));
  auto bytes = f.finish();
  return {bytes.begin(), bytes.end()};
}
} // namespace

// Frames whose registers are partly unavailable are stored compactly: the
// buffer holds about four times more `collect $rdi` frames, and every reader
// (frame, the stream at any offset) gets the frames' exact tfile bytes.
TEST(TraceBuffer, StoresPartialRegisterFramesCompactly) {
  auto held = ebpf_registers();
  const size_t full = register_frame(1, 0).size(); // 6 + 1 + 816
  ASSERT_EQ(full, 823u);
  TraceBuffer buf(100 * full);
  buf.set_register_block_size(GT_REGBLOCK_SIZE_AVX);
  uint16_t set = buf.register_set(held);
  std::vector<uint8_t> want;
  size_t held_frames = 0;
  while (true) {
    auto f = register_frame(uint16_t(1 + held_frames % 3), held_frames, held_frames % 5 * 9);
    if (!buf.append(f, uint16_t(1 + held_frames % 3), 0x401000 + held_frames % 3, set))
      break;
    want.insert(want.end(), f.begin(), f.end());
    ++held_frames;
  }
  // 207 stored bytes a frame, plus its memory block: ~3.5x more frames.
  EXPECT_GE(held_frames, 340u) << "a 100-frame buffer should hold ~3.5x more compact frames";
  EXPECT_EQ(buf.frame_count(), held_frames);
  EXPECT_LE(buf.used(), buf.capacity());
  EXPECT_LT(buf.free_bytes(), 300u) << "free space counts the stored (compact) bytes";
  EXPECT_EQ(buf.stream_size(), want.size());
  EXPECT_EQ(stream_of(buf), want);
  // Any window of the stream, as qTBuffer's 2000-byte chunks and odd offsets read it.
  for (uint64_t off : {uint64_t(0), uint64_t(1), uint64_t(822), uint64_t(823), uint64_t(5000),
                       uint64_t(want.size() - 7)})
    for (uint64_t len : {uint64_t(1), uint64_t(2000), uint64_t(100000)}) {
      auto got = stream_of(buf, off, len);
      size_t n = size_t(std::min<uint64_t>(len, want.size() - off));
      ASSERT_EQ(got, std::vector<uint8_t>(want.begin() + long(off), want.begin() + long(off + n)))
          << "offset " << off << " length " << len;
    }
  EXPECT_TRUE(stream_of(buf, want.size(), 10).empty());
  // Frame by frame, with the registers each holds.
  size_t at = 0;
  for (long n = 0; n < long(held_frames); ++n) {
    auto f = frame_at(buf, n);
    ASSERT_EQ(f, std::vector<uint8_t>(want.begin() + long(at), want.begin() + long(at + f.size())));
    at += f.size();
    ASSERT_NE(buf.frame_registers_held(n), nullptr);
    EXPECT_EQ(*buf.frame_registers_held(n), held);
  }
}

// A frame without a held set (ptrace: every register) is stored as it is, and
// a reader of the stream gets runs of such frames in one piece.
TEST(TraceBuffer, MixesCompactAndWholeFrames) {
  auto held = ebpf_registers();
  TraceBuffer buf(1 << 20);
  buf.set_register_block_size(GT_REGBLOCK_SIZE_AVX);
  uint16_t set = buf.register_set(held);
  std::vector<uint8_t> want;
  for (uint64_t i = 0; i < 30; i++) {
    auto f = register_frame(2, i, i % 4);
    bool compact = i % 10 >= 7; // runs of 7 whole frames, then 3 compact ones
    ASSERT_TRUE(buf.append(f, 2, 0x401000, compact ? set : TraceBuffer::kAllRegisters));
    want.insert(want.end(), f.begin(), f.end());
  }
  EXPECT_EQ(buf.frame_registers_held(0), nullptr);
  EXPECT_LT(buf.used(), want.size());
  size_t pieces = 0;
  std::vector<uint8_t> got;
  buf.read_stream(0, UINT64_MAX, [&](std::span<const uint8_t> piece) {
    ++pieces;
    got.insert(got.end(), piece.begin(), piece.end());
    return true;
  });
  EXPECT_EQ(got, want);
  EXPECT_EQ(pieces, 3u * (1 + 3)) << "each run of whole frames in one piece, compact ones apart";
  // A sink that stops is not called again.
  pieces = 0;
  buf.read_stream(0, UINT64_MAX, [&](std::span<const uint8_t>) { return ++pieces < 2; });
  EXPECT_EQ(pieces, 2u);
}

// Circular mode makes room by compact size, and stream offsets start at the
// oldest frame kept.
TEST(TraceBuffer, CircularDiscardsByStoredSize) {
  auto held = ebpf_registers();
  const size_t compact_frame = 6 + 1 + 8 * 25;
  TraceBuffer buf(10 * compact_frame);
  buf.set_register_block_size(GT_REGBLOCK_SIZE_AVX);
  buf.set_circular(true);
  uint16_t set = buf.register_set(held);
  std::vector<std::vector<uint8_t>> frames;
  for (uint64_t i = 0; i < 25; i++) {
    frames.push_back(register_frame(uint16_t(i), i));
    ASSERT_TRUE(buf.append(frames.back(), uint16_t(i), 0x1000 + i, set));
  }
  EXPECT_EQ(buf.used(), 10 * compact_frame);
  EXPECT_EQ(buf.frame_count(), 10u);
  EXPECT_EQ(buf.frames_discarded(), 15u);
  std::vector<uint8_t> want;
  for (size_t i = 15; i < 25; i++)
    want.insert(want.end(), frames[i].begin(), frames[i].end());
  EXPECT_EQ(stream_of(buf), want);
  EXPECT_EQ(stream_of(buf, 823, 823), frames[16]);
  EXPECT_EQ(buf.find_tracepoint(17, -1), 2);
}

// A frame that arrives compact (an eBPF ring record) is stored as it is and
// reads back as the tfile frame; register sets keep their numbers across clear().
TEST(TraceBuffer, StoresCompactRecordsAsTheyAre) {
  auto held = ebpf_registers();
  TraceBuffer buf(1 << 20);
  buf.set_register_block_size(GT_REGBLOCK_SIZE_AVX);
  uint16_t set = buf.register_set(held);
  EXPECT_EQ(buf.register_set(held), set);
  std::vector<uint8_t> want;
  for (uint64_t i = 0; i < 5; i++) {
    auto f = register_frame(4, i, i * 3);
    auto regs = CompactRegisters::of_mask(register_mask(held));
    std::vector<uint8_t> record(compact_size(f.size(), 1, regs, GT_REGBLOCK_SIZE_AVX));
    compact_frame(f, regs, GT_REGBLOCK_SIZE_AVX, record.data());
    ASSERT_TRUE(buf.append_compact(record, 4, 0x401000, set));
    EXPECT_EQ(buf.frame_stream_bytes(long(i)), f.size());
    want.insert(want.end(), f.begin(), f.end());
  }
  EXPECT_EQ(stream_of(buf), want);
  EXPECT_EQ(buf.used(), 5 * (6 + 1 + 8 * 25) + (3 + 6 + 9 + 12) + 4 * 11);
  buf.clear();
  EXPECT_EQ(buf.register_set(held), set);
  EXPECT_EQ(buf.registers_of(set), held);
}
