#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include "common/hex.h"
#include "rsp/packet_codec.h"
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
    table.add(vf.rows());
  }
  void TearDown() override { unlink(path.c_str()); }
  std::string hexpath() const { return hex::encode(std::string_view(path)); }
  // REQUEST through the packet table, as gdb's "vFile:REQUEST", the reply
  // unescaped as gdb reads it.
  std::string handle(const std::string& request) {
    auto reply = table.dispatch("vFile:" + request);
    EXPECT_TRUE(reply.has_value()) << request;
    return rsp::unescape_binary(reply.value_or("")).value_or("<bad escape>");
  }
  // Opens the test file with gdb's FLAGS; the fd's number as gdb reads it.
  std::string open_file(const char* flags) {
    std::string fd = handle("open:" + hexpath() + "," + flags + ",0");
    EXPECT_EQ(fd[0], 'F') << fd;
    return fd.substr(1);
  }
  std::string path;
  VFileServer vf;
  PacketTable table;
};

TEST_F(VFile, OpenReadStatClose) {
  std::string num = open_file("0");
  EXPECT_EQ(handle("pread:" + num + ",5,7"), "F5;world");
  EXPECT_EQ(handle("pread:" + num + ",100,c"), "F0;");
  std::string st = handle("fstat:" + num);
  ASSERT_EQ(st.substr(0, 4), "F40;");
  ASSERT_EQ(st.size(), 4u + 64u);
  // st_size is the big-endian u64 at offset 28 of struct gdb stat.
  uint64_t size = 0;
  for (int i = 0; i < 8; i++)
    size = size << 8 | static_cast<uint8_t>(st[4 + 28 + i]);
  EXPECT_EQ(size, 12u);
  EXPECT_EQ(handle("close:" + num), "F0");
  EXPECT_EQ(handle("close:" + num), "F-1,9"); // EBADF
}

TEST_F(VFile, WriteUnlinkReadlink) {
  std::string num = open_file("2");
  EXPECT_EQ(handle("pwrite:" + num + ",0,HELLO"), "F5");
  EXPECT_EQ(handle("pread:" + num + ",5,0"), "F5;HELLO");
  handle("close:" + num);
  EXPECT_EQ(handle("readlink:" + hex::encode(std::string_view("/proc/self/exe"))).substr(0, 1),
            "F");
  EXPECT_EQ(handle("unlink:" + hexpath()), "F0");
  EXPECT_EQ(handle("open:" + hexpath() + ",0,0"), "F-1,2"); // ENOENT
}

TEST_F(VFile, MalformedRequests) {
  EXPECT_EQ(handle("open:zz,0,0"), "F-1,16");
  EXPECT_EQ(handle("open:" + hexpath()), "F-1,16");
  EXPECT_EQ(handle("pread:1,2"), "F-1,16");
  EXPECT_EQ(handle("pread:3e7,10,0"), "F-1,9");
  EXPECT_EQ(handle("setfs:0"), "F0");
  EXPECT_EQ(handle("setfs:7ffffff0"), "F-1,270f"); // no such process
  EXPECT_EQ(handle("bogus:1"), "");
}

// pwrite data is escaped on the wire ('}' then the byte xor 0x20); the table
// unescapes it once, and a packet ending in a lone '}' is EINVAL.
TEST_F(VFile, PwriteDataIsUnescapedOnce) {
  std::string fd = handle("open:" + hexpath() + ",2,0");
  ASSERT_EQ(fd[0], 'F');
  std::string num = fd.substr(1);
  EXPECT_EQ(handle("pwrite:" + num + ",0," + rsp::escape_binary("a#}$*")), "F5");
  EXPECT_EQ(handle("pread:" + num + ",5,0"), "F5;a#}$*");
  EXPECT_EQ(handle("pwrite:" + num + ",0,ab}"), "F-1,16");
  handle("close:" + num);
}
