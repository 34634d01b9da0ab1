#include <gtest/gtest.h>

#include "common/hex.h"
#include "server/packet_parsers.h"

using namespace gdbtrace;

TEST(ThreadId, Forms) {
  EXPECT_EQ(parse_thread_id("p1a.1b", 5), (ThreadId{0x1a, 0x1b}));
  EXPECT_EQ(parse_thread_id("p1a", 5), (ThreadId{0x1a, -1}));
  EXPECT_EQ(parse_thread_id("p-1", 5), (ThreadId{-1, -1}));
  EXPECT_EQ(parse_thread_id("p1a.-1", 5), (ThreadId{0x1a, -1}));
  EXPECT_EQ(parse_thread_id("-1", 5), (ThreadId{-1, -1}));
  EXPECT_EQ(parse_thread_id("0", 5), (ThreadId{0, 0}));
  EXPECT_EQ(parse_thread_id("p0.0", 5), (ThreadId{0, 0}));
  EXPECT_EQ(parse_thread_id("10", 5), (ThreadId{5, 16}));
  EXPECT_FALSE(parse_thread_id("", 5));
  EXPECT_FALSE(parse_thread_id("pzz", 5));
  EXPECT_FALSE(parse_thread_id("p1.", 5));
  EXPECT_FALSE(parse_thread_id("p100000000.1", 5));
  EXPECT_EQ(format_thread_id({0x5dbd, 0x5dbe}, true), "p5dbd.5dbe");
  EXPECT_EQ(format_thread_id({0x5dbd, 0x5dbe}, false), "5dbe");
  EXPECT_EQ(format_thread_id({-1, -1}, true), "p-1.-1");
}

TEST(VCont, Actions) {
  auto a = parse_vcont(";s:p1.2;C0b:p1.3;r1000,1010:p1.4;t:p1.5;c", 1);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->size(), 5u);
  EXPECT_EQ((*a)[0].kind, ResumeKind::Step);
  EXPECT_EQ((*a)[0].thread, (ThreadId{1, 2}));
  EXPECT_EQ((*a)[1].kind, ResumeKind::Continue);
  EXPECT_EQ((*a)[1].gdb_signal, 11);
  EXPECT_EQ((*a)[2].kind, ResumeKind::RangeStep);
  EXPECT_EQ((*a)[2].range_start, 0x1000u);
  EXPECT_EQ((*a)[2].range_end, 0x1010u);
  EXPECT_EQ((*a)[3].kind, ResumeKind::Stop);
  EXPECT_EQ((*a)[4].thread, (ThreadId{-1, -1}));
}

TEST(VCont, Malformed) {
  for (const char* bad :
       {"", ";", ";x", ";c:", ";C", ";Czz", ";C1ff", ";r10", ";r10,zz", ";cc", ";c;", ";s:pzz"})
    EXPECT_FALSE(parse_vcont(bad, 1)) << bad;
}

TEST(ZPacket, Plain) {
  auto z = parse_z_packet("Z0,7ffff7fcc060,1");
  ASSERT_TRUE(z);
  EXPECT_TRUE(z->insert);
  EXPECT_EQ(z->type, 0);
  EXPECT_EQ(z->address, 0x7ffff7fcc060u);
  EXPECT_EQ(z->kind, 1);
  auto r = parse_z_packet("z2,601040,4");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->insert);
  EXPECT_EQ(r->type, 2);
}

TEST(ZPacket, ConditionsAndCommands) {
  // Two conditions back to back (gdb sends no separator), then commands.
  auto z = parse_z_packet("Z0,400000,1;X2,2227X3,220127;cmds:1,X1,27X2,2627");
  ASSERT_TRUE(z) << z.error().message;
  ASSERT_EQ(z->conditions.size(), 2u);
  EXPECT_EQ(z->conditions[0], std::string("\x22\x27", 2));
  EXPECT_EQ(z->conditions[1], std::string("\x22\x01\x27", 3));
  EXPECT_TRUE(z->persist);
  ASSERT_EQ(z->commands.size(), 2u);
  EXPECT_EQ(z->commands[1], std::string("\x26\x27", 2));

  auto c = parse_z_packet("Z0,400000,1;cmds:0,X1,27");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->conditions.empty());
  EXPECT_FALSE(c->persist);
  EXPECT_EQ(c->commands.size(), 1u);
}

TEST(ZPacket, Malformed) {
  for (const char* bad :
       {"Z", "Z5,1,1", "Z0", "Z0,", "Z0,zz,1", "Z0,1", "Z0,1,zz", "Z0,1,1;X", "Z0,1,1;X2,22",
        "Z0,1,1;X2,zz27", "Z0,1,1;cmds:", "Z0,1,1;bogus", "Z0,1,1;Xffffffff,00", "Z0,1,1000"})
    EXPECT_FALSE(parse_z_packet(bad)) << bad;
}

TEST(QSupported, Features) {
  auto f =
      parse_qsupported("qSupported:multiprocess+;swbreak+;hwbreak-;xmlRegisters=i386;fork-events+");
  EXPECT_TRUE(f.count("multiprocess"));
  EXPECT_TRUE(f.count("swbreak"));
  EXPECT_TRUE(f.count("fork-events"));
  EXPECT_FALSE(f.count("hwbreak"));
  EXPECT_FALSE(f.count("xmlRegisters=i386"));
  EXPECT_TRUE(parse_qsupported("qSupported").empty());
}

TEST(VRun, HexArguments) {
  auto r = parse_vrun("vRun;" + hex::encode(std::string_view("/bin/echo")) + ";" +
                      hex::encode(std::string_view("a b")) + ";");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::string>{"/bin/echo", "a b", ""}));
  auto empty = parse_vrun("vRun;");
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, (std::vector<std::string>{""}));
  EXPECT_FALSE(parse_vrun("vRun;zz"));
  EXPECT_FALSE(parse_vrun("vRun;abc"));
}

TEST(QXfer, Read) {
  auto x = parse_qxfer_read("qXfer:features:read:target.xml:0,fff");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->object, "features");
  EXPECT_EQ(x->annex, "target.xml");
  EXPECT_EQ(x->length, 0xfffu);
  auto t = parse_qxfer_read("qXfer:threads:read::10,20");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->annex, "");
  EXPECT_EQ(t->offset, 0x10u);
  EXPECT_FALSE(parse_qxfer_read("qXfer:threads:read::10"));
  EXPECT_FALSE(parse_qxfer_read("qXfer:threads:write::10,2"));
}

TEST(Memory, Ranges) {
  auto m = parse_memory_range("7fff0000,40", false);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->address, 0x7fff0000u);
  EXPECT_EQ(m->length, 0x40u);
  auto w = parse_memory_range("1000,2:abcd", true);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->data, "abcd");
  EXPECT_FALSE(parse_memory_range("1000", false));
  EXPECT_FALSE(parse_memory_range("1000,2", true));
  EXPECT_FALSE(parse_memory_range("zz,2", false));
}
