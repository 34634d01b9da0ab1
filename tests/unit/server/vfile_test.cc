#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include "common/hex.h"
#include "server/vfile.h"

using namespace gdbtrace;

class VFile : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gdbtrace-vfile-XXXXXX";
    int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "hello, world", 12), 12);
    close(fd);
    path = tmpl;
  }
  void TearDown() override { unlink(path.c_str()); }
  std::string hexpath() const { return hex::encode(std::string_view(path)); }
  std::string path;
  VFileServer vf;
};

TEST_F(VFile, OpenReadStatClose) {
  std::string fd = vf.handle("open:" + hexpath() + ",0,0");
  ASSERT_EQ(fd[0], 'F');
  std::string num = fd.substr(1);
  EXPECT_EQ(vf.handle("pread:" + num + ",5,7"), "F5;world");
  EXPECT_EQ(vf.handle("pread:" + num + ",100,c"), "F0;");
  std::string st = vf.handle("fstat:" + num);
  ASSERT_EQ(st.substr(0, 4), "F40;");
  ASSERT_EQ(st.size(), 4u + 64u);
  // st_size is the big-endian u64 at offset 28 of struct gdb stat.
  uint64_t size = 0;
  for (int i = 0; i < 8; i++)
    size = size << 8 | static_cast<uint8_t>(st[4 + 28 + i]);
  EXPECT_EQ(size, 12u);
  EXPECT_EQ(vf.handle("close:" + num), "F0");
  EXPECT_EQ(vf.handle("close:" + num), "F-1,9"); // EBADF
}

TEST_F(VFile, WriteUnlinkReadlink) {
  std::string fd = vf.handle("open:" + hexpath() + ",2,0");
  ASSERT_EQ(fd[0], 'F');
  std::string num = fd.substr(1);
  EXPECT_EQ(vf.handle("pwrite:" + num + ",0,HELLO"), "F5");
  EXPECT_EQ(vf.handle("pread:" + num + ",5,0"), "F5;HELLO");
  vf.handle("close:" + num);
  EXPECT_EQ(vf.handle("readlink:" + hex::encode(std::string_view("/proc/self/exe"))).substr(0, 1),
            "F");
  EXPECT_EQ(vf.handle("unlink:" + hexpath()), "F0");
  EXPECT_EQ(vf.handle("open:" + hexpath() + ",0,0"), "F-1,2"); // ENOENT
}

TEST_F(VFile, MalformedRequests) {
  EXPECT_EQ(vf.handle("open:zz,0,0"), "F-1,16");
  EXPECT_EQ(vf.handle("open:" + hexpath()), "F-1,16");
  EXPECT_EQ(vf.handle("pread:1,2"), "F-1,16");
  EXPECT_EQ(vf.handle("pread:3e7,10,0"), "F-1,9");
  EXPECT_EQ(vf.handle("setfs:0"), "F0");
  EXPECT_EQ(vf.handle("setfs:7ffffff0"), "F-1,270f"); // no such process
  EXPECT_EQ(vf.handle("bogus:1"), "");
}
