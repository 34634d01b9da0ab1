// Symbol lookup in the ELF files mapped into a process (used by libthread_db's
// ps_pglobal_lookup for qGetTLSAddr): checked against this test process itself.
#include <gtest/gtest.h>

#include <sys/sysmacros.h>
#include <unistd.h>

#include "target/elf_symbols.h"
#include "target/proc_files.h"

extern "C" int elf_symbols_test_marker() {
  return 42;
}

namespace gdbtrace {
namespace {

TEST(ElfSymbols, ParsesOffsetZeroMappingsOncePerFile) {
  const char* maps =
      "555555554000-555555555000 r--p 00000000 fe:00 1 /usr/bin/prog\n"
      "555555555000-555555556000 r-xp 00001000 fe:00 1 /usr/bin/prog\n"
      "7ffff7dc0000-7ffff7de0000 r--p 00000000 fe:00 2 /lib/x86_64-linux-gnu/libc.so.6\n"
      "7ffff7fc0000-7ffff7fc1000 rw-p 00000000 00:00 0 \n"
      "7ffff7fc2000-7ffff7fc3000 r--p 00000000 fe:00 3 /tmp/gone.so (deleted)\n"
      "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]\n"
      "7ffff7fd0000-7ffff7fd1000 r--p 00000000 fe:00 4 /path with spaces/lib.so\n";
  auto objects = parse_mapped_objects(maps);
  ASSERT_EQ(objects.size(), 3u);
  EXPECT_EQ(objects[0].path, "/usr/bin/prog");
  EXPECT_EQ(objects[0].base, 0x555555554000u);
  EXPECT_EQ(objects[1].path, "/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(objects[2].path, "/path with spaces/lib.so");
}

// The one /proc/PID/maps parser (the probe sites and the symbol lookup use it).
TEST(ProcMaps, ParsesEveryFieldAndPathsWithSpaces) {
  auto maps = procfs::parse_maps("7ffff7dc0000-7ffff7de0000 r-xp 00028000 fe:01 1234 /lib/a b.so\n"
                                 "7ffff7fc0000-7ffff7fc1000 rw-p 00000000 00:00 0\n"
                                 "not a maps line\n"
                                 "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]");
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_EQ(maps[0].start, 0x7ffff7dc0000u);
  EXPECT_EQ(maps[0].end, 0x7ffff7de0000u);
  EXPECT_EQ(maps[0].perms, "r-xp");
  EXPECT_EQ(maps[0].offset, 0x28000u);
  EXPECT_EQ(maps[0].dev, makedev(0xfe, 0x01));
  EXPECT_EQ(maps[0].inode, 1234u);
  EXPECT_EQ(maps[0].path, "/lib/a b.so");
  EXPECT_EQ(maps[1].path, "");
  EXPECT_EQ(maps[2].path, "[stack]");
}

TEST(ProcMaps, ReadsOwnMapsAndFailsForAGoneProcess) {
  auto own = procfs::read_maps(getpid());
  ASSERT_TRUE(own.ok());
  EXPECT_FALSE(own->empty());
  EXPECT_FALSE(procfs::read_maps(0x7ffffff0).ok());
}

TEST(ElfSymbols, FindsOwnFunctionAtItsRuntimeAddress) {
  auto address = find_mapped_symbol(getpid(), "elf_symbols_test_marker");
  ASSERT_TRUE(address.has_value());
  EXPECT_EQ(*address, reinterpret_cast<uint64_t>(&elf_symbols_test_marker));
}

TEST(ElfSymbols, FindsLibcSymbolsLibthreadDbNeeds) {
  // glibc exports its libthread_db descriptors in .dynsym (no debug info needed).
  EXPECT_TRUE(find_mapped_symbol(getpid(), "__nptl_version").has_value());
  EXPECT_TRUE(find_mapped_symbol(getpid(), "_thread_db_pthread_tid").has_value());
}

TEST(ElfSymbols, UnknownSymbolOrFileIsNotFound) {
  EXPECT_FALSE(find_mapped_symbol(getpid(), "no_such_symbol_anywhere_4711").has_value());
  EXPECT_FALSE(elf_symbol_address("/nonexistent/file.so", 0, "main").has_value());
  EXPECT_FALSE(elf_symbol_address("/proc/self/status", 0, "main").has_value()); // not ELF
}

} // namespace
} // namespace gdbtrace
