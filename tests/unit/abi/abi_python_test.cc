// The plugin decodes frames and register blocks in Python; this test fails
// when its constants (gdb-plugin/gdbtrace_plugin/{frames,regs}.py) differ from
// the C headers that own the formats (abi/tframe.h, abi/amd64_regs.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "abi/amd64_regs.h"
#include "abi/tframe.h"

namespace {

// NAME=VALUE lines printed by the plugin's modules, imported without gdb.
std::map<std::string, long> python_constants() {
  const char* script = "import sys; sys.path.insert(0, '" GDBTRACE_PLUGIN_DIR "')\n"
                       "from gdbtrace_plugin import frames, regs\n"
                       "print('header', frames.FRAME_HEADER_SIZE)\n"
                       "print('regs_tag', frames.BLOCK_REGS)\n"
                       "print('mem_tag', frames.BLOCK_MEM)\n"
                       "print('tsv_tag', frames.BLOCK_TSV)\n"
                       "print('mem_header', frames.MEM_BLOCK_HEADER_SIZE)\n"
                       "print('tsv_block', frames.TSV_BLOCK_SIZE)\n"
                       "print('mem_max', frames.MEM_BLOCK_MAX)\n"
                       "print('regblock_noavx', regs.REGBLOCK_SIZE_NOAVX)\n"
                       "print('regblock_avx', regs.REGBLOCK_SIZE_AVX)\n"
                       "print('num_regs', len(regs.NAMES))\n"
                       "for n in range(len(regs.NAMES)):\n"
                       "    print('size%d' % n, regs.reg_size(n))\n"
                       "    print('offset%d' % n, regs.OFFSETS[n])\n"
                       "for name in ('rip', 'eflags', 'rsp', 'rbp', 'fs_base'):\n"
                       "    print(name, regs.NUMBER[name])\n";
  std::string cmd = std::string(GDBTRACE_PYTHON[0] ? GDBTRACE_PYTHON : "python3") + " -c \"$S\"";
  setenv("S", script, 1);
  std::map<std::string, long> out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p)
    return out;
  char name[64];
  long value = 0;
  while (fscanf(p, "%63s %ld", name, &value) == 2)
    out[name] = value;
  pclose(p);
  return out;
}

TEST(AbiPython, FrameLayoutMatchesTframeH) {
  auto py = python_constants();
  ASSERT_FALSE(py.empty()) << "the plugin's modules did not load";
  EXPECT_EQ(py["header"], long(GT_TFRAME_HEADER_SIZE));
  EXPECT_EQ(py["regs_tag"], long(GT_TFRAME_REGS));
  EXPECT_EQ(py["mem_tag"], long(GT_TFRAME_MEM));
  EXPECT_EQ(py["tsv_tag"], long(GT_TFRAME_TSV));
  EXPECT_EQ(py["mem_header"], long(GT_TFRAME_MEM_HEADER));
  EXPECT_EQ(py["tsv_block"], long(GT_TFRAME_TSV_SIZE));
  EXPECT_EQ(py["mem_max"], long(GT_TFRAME_MEM_MAX));
}

TEST(AbiPython, RegisterLayoutMatchesAmd64RegsH) {
  auto py = python_constants();
  ASSERT_FALSE(py.empty()) << "the plugin's modules did not load";
  EXPECT_EQ(py["regblock_noavx"], long(GT_REGBLOCK_SIZE_NOAVX));
  EXPECT_EQ(py["regblock_avx"], long(GT_REGBLOCK_SIZE_AVX));
  ASSERT_EQ(py["num_regs"], long(GT_NUM_REGS_AVX));
  for (unsigned r = 0; r < GT_NUM_REGS_AVX; r++) {
    EXPECT_EQ(py["size" + std::to_string(r)], long(gt_reg_size(r))) << "register " << r;
    EXPECT_EQ(py["offset" + std::to_string(r)], long(gt_reg_offset(r))) << "register " << r;
  }
  EXPECT_EQ(py["rip"], long(GT_RIP));
  EXPECT_EQ(py["eflags"], long(GT_EFLAGS));
  EXPECT_EQ(py["rsp"], long(GT_RSP));
  EXPECT_EQ(py["rbp"], long(GT_RBP));
  EXPECT_EQ(py["fs_base"], long(GT_FS_BASE));
}

} // namespace
