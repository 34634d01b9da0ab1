// The target description must put every register at the 'g' offset
// abi/amd64_regs.h gives it; gdb itself is the judge of how it reads the XML.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "../strict_skip.h"
#include "abi/amd64_regs.h"
#include "abi/i386_regs.h"
#include "server/tdesc.h"

using namespace gdbtrace;

static RegisterLayout amd64(bool avx) {
  return {RegisterArch::Amd64, avx};
}
static RegisterLayout i386(bool avx) {
  return {RegisterArch::I386, avx};
}

struct XmlReg {
  std::string name;
  unsigned bitsize, regnum;
};

static std::vector<XmlReg> regs_in(const std::string& xml) {
  std::vector<XmlReg> out;
  std::regex re(R"re(<reg name="([^"]+)" bitsize="(\d+)" type="[^"]+" regnum="(\d+)")re");
  for (auto it = std::sregex_iterator(xml.begin(), xml.end(), re); it != std::sregex_iterator();
       ++it)
    out.push_back({(*it)[1], static_cast<unsigned>(std::stoul((*it)[2])),
                   static_cast<unsigned>(std::stoul((*it)[3]))});
  return out;
}

TEST(Tdesc, RegistersInContractOrder) {
  for (bool avx : {false, true}) {
    auto regs = regs_in(target_xml(amd64(avx)));
    unsigned expected = avx ? GT_NUM_REGS_AVX : GT_NUM_REGS_NOAVX;
    ASSERT_EQ(regs.size(), expected);
    unsigned total = 0;
    for (unsigned i = 0; i < regs.size(); i++) {
      EXPECT_EQ(regs[i].regnum, i) << regs[i].name;
      EXPECT_EQ(regs[i].bitsize, gt_reg_size(i) * 8) << regs[i].name;
      total += regs[i].bitsize / 8;
    }
    EXPECT_EQ(total, avx ? GT_REGBLOCK_SIZE_AVX : GT_REGBLOCK_SIZE_NOAVX);
  }
  auto regs = regs_in(target_xml(amd64(true)));
  EXPECT_EQ(regs[GT_RIP].name, "rip");
  EXPECT_EQ(regs[GT_EFLAGS].name, "eflags");
  EXPECT_EQ(regs[GT_ORIG_RAX].name, "orig_rax");
  EXPECT_EQ(regs[GT_FS_BASE].name, "fs_base");
  EXPECT_EQ(regs[GT_YMM0H].name, "ymm0h");
}

// gdbserver's i386-linux description: core, sse, linux (orig_eax), avx; no segments.
TEST(Tdesc, I386RegistersAndFeatures) {
  for (bool avx : {false, true}) {
    std::string xml = target_xml(i386(avx));
    auto regs = regs_in(xml);
    ASSERT_EQ(regs.size(), avx ? GT32_NUM_REGS_AVX : GT32_NUM_REGS_NOAVX);
    unsigned total = 0;
    for (unsigned i = 0; i < regs.size(); i++) {
      EXPECT_EQ(regs[i].regnum, i) << regs[i].name;
      EXPECT_EQ(regs[i].bitsize, gt32_reg_size(i) * 8) << regs[i].name;
      total += regs[i].bitsize / 8;
    }
    EXPECT_EQ(total, avx ? GT32_REGBLOCK_SIZE_AVX : GT32_REGBLOCK_SIZE_NOAVX);
    EXPECT_EQ(regs[GT32_ESP].name, "esp");
    EXPECT_EQ(regs[GT32_EIP].name, "eip");
    EXPECT_EQ(regs[GT32_ORIG_EAX].name, "orig_eax");
    EXPECT_NE(xml.find("<architecture>i386</architecture>"), std::string::npos);
    EXPECT_EQ(xml.find("org.gnu.gdb.i386.segments"), std::string::npos);
    EXPECT_EQ(xml.find("org.gnu.gdb.i386.avx") != std::string::npos, avx);
  }
}

// An i386 register is the low part of its amd64 register; eax and orig_eax are
// sign-extended into it (syscall restart), the others zero-extended.
TEST(RegisterLayout, I386RegistersLiveInTheAmd64Block) {
  RegisterLayout l = i386(true);
  RegisterBlock block;
  uint8_t minus_one[4] = {0xff, 0xff, 0xff, 0xff};
  l.set(block, GT32_ORIG_EAX, minus_one);
  EXPECT_EQ(block.get_u64(GT_ORIG_RAX), ~0ull);
  l.set(block, GT32_ECX, minus_one);
  EXPECT_EQ(block.get_u64(GT_RCX), 0xffffffffull);
  l.set(block, GT32_EIP, minus_one);
  EXPECT_EQ(block.pc(), 0xffffffffull);
  EXPECT_EQ(l.block_regno(GT32_ESP), unsigned(GT_RSP));
  EXPECT_EQ(l.block_regno(GT32_XMM0 + 7), unsigned(GT_XMM0 + 7));
  EXPECT_EQ(l.block_regno(GT32_FCTRL), unsigned(GT_FCTRL));
  EXPECT_EQ(l.block_regno(GT32_YMM0H + 7), unsigned(GT_YMM0H + 7));
  block.set_u64(GT_RBX, 0x1122334455667788ull);
  uint8_t out[4];
  l.get(block, GT32_EBX, out);
  EXPECT_EQ(out[0], 0x88);
  EXPECT_EQ(out[3], 0x55);
  EXPECT_TRUE(l.valid(block, GT32_EBX));
  EXPECT_FALSE(l.valid(block, GT32_EDX));
}

TEST(Tdesc, FeaturesPresent) {
  std::string xml = target_xml(amd64(true));
  for (const char* f : {"org.gnu.gdb.i386.core", "org.gnu.gdb.i386.sse", "org.gnu.gdb.i386.linux",
                        "org.gnu.gdb.i386.segments", "org.gnu.gdb.i386.avx"})
    EXPECT_NE(xml.find(f), std::string::npos) << f;
  EXPECT_EQ(target_xml(amd64(false)).find("org.gnu.gdb.i386.avx"), std::string::npos);
  EXPECT_NE(xml.find("<architecture>i386:x86-64</architecture>"), std::string::npos);
  EXPECT_NE(xml.find("<osabi>GNU/Linux</osabi>"), std::string::npos);
}

// gdb reads the XML and prints each register's remote number and 'g' offset.
TEST(Tdesc, GdbAgreesWithGLayout) {
  if (access("/usr/bin/gdb", X_OK) != 0)
    GDBTRACE_SKIP("no-gdb") << "no /usr/bin/gdb";
  for (RegisterLayout layout : {amd64(false), amd64(true), i386(false), i386(true)}) {
    char path[] = "/tmp/gdbtrace-tdesc-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    std::string xml = target_xml(layout);
    ASSERT_EQ(write(fd, xml.data(), xml.size()), static_cast<ssize_t>(xml.size()));
    close(fd);
    std::string cmd = std::string("/usr/bin/gdb -nx -batch -ex 'set tdesc filename ") + path +
                      "' -ex 'maint print remote-registers' 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p))
      out.append(buf, n);
    pclose(p);
    unlink(path);
    // " rax  0  0  0  8 int64_t  0  0": name, ..., size, type, remote nr, g offset.
    std::regex row(R"(^ (\S+)\s+\d+\s+\d+\s+\d+\s+(\d+)\s+\S+\s+(\d+)\s+(\d+)\s*$)");
    std::map<unsigned, std::pair<unsigned, unsigned>> seen; // remote nr -> (size, offset)
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (std::regex_match(line, m, row))
        seen[std::stoul(m[3])] = {static_cast<unsigned>(std::stoul(m[2])),
                                  static_cast<unsigned>(std::stoul(m[4]))};
    }
    unsigned n = layout.count();
    ASSERT_EQ(seen.size(), n) << out;
    for (unsigned r = 0; r < n; r++) {
      EXPECT_EQ(seen[r].first, layout.size(r)) << "regnum " << r;
      EXPECT_EQ(seen[r].second, layout.offset(r)) << "regnum " << r;
    }
  }
}

// A saved trace file whose frames lack x87/SSE/AVX: those registers are numbered
// after all the present ones, which keep their g-packet order (and so their
// offsets in the file's shorter 'R' blocks).
TEST(TargetXml, AbsentRegistersNumberedLast) {
  std::vector<bool> present(GT_NUM_REGS_AVX, true);
  for (unsigned r = GT_ST0; r < GT_ORIG_RAX; r++)
    present[r] = false;
  for (unsigned r = GT_YMM0H; r < GT_NUM_REGS_AVX; r++)
    present[r] = false;
  std::string xml = target_xml(amd64(true), present);
  auto regnum = [&](const char* name) {
    std::smatch m;
    std::string pattern = std::string("name=\"") + name + "\"[^>]*regnum=\"(\\d+)\"";
    EXPECT_TRUE(std::regex_search(xml, m, std::regex(pattern))) << name;
    return std::stoul(m[1]);
  };
  EXPECT_EQ(regnum("rax"), 0u);
  EXPECT_EQ(regnum("gs"), 23u);
  EXPECT_EQ(regnum("orig_rax"), 24u);
  EXPECT_EQ(regnum("fs_base"), 25u);
  EXPECT_EQ(regnum("gs_base"), 26u);
  EXPECT_EQ(regnum("st0"), 27u);
  EXPECT_EQ(regnum("xmm0"), 43u);
  EXPECT_EQ(regnum("ymm15h"), 75u);
  // Without PRESENT: the g-packet numbering.
  EXPECT_NE(
      target_xml(amd64(true)).find("name=\"st0\" bitsize=\"80\" type=\"i387_ext\" regnum=\"24\""),
      std::string::npos);
}

// gdb's tfile reader walks registers in its own order and stops at the first
// one beyond the 'R' block: what a file keeps after an absent one is unreadable.
TEST(Tdesc, RegistersTfileCannotShow) {
  std::vector<bool> ptrace_frames(GT_NUM_REGS_AVX, true);
  EXPECT_TRUE(registers_tfile_cannot_show(true, ptrace_frames).empty());
  EXPECT_TRUE(registers_tfile_cannot_show(true, {}).empty());
  // A kernel collector's frames: no ds/es/fs/gs selectors, no x87/SSE/AVX.
  std::vector<bool> kernel_frames(GT_NUM_REGS_AVX, false);
  for (unsigned r = GT_RAX; r <= GT_SS; ++r)
    kernel_frames[r] = true;
  kernel_frames[GT_ORIG_RAX] = kernel_frames[GT_FS_BASE] = true;
  EXPECT_EQ(registers_tfile_cannot_show(true, kernel_frames),
            (std::vector<std::string>{"fs_base", "orig_rax"}));
  // Only x87/SSE/AVX missing: fs_base still follows an absent register.
  std::vector<bool> no_fpu(GT_NUM_REGS_NOAVX, true);
  for (unsigned r = GT_ST0; r <= GT_MXCSR; ++r)
    no_fpu[r] = false;
  EXPECT_EQ(registers_tfile_cannot_show(false, no_fpu),
            (std::vector<std::string>{"fs_base", "gs_base", "orig_rax"}));
}
