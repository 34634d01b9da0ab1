// Connection over a fake transport: ack handling, no-ack mode, retransmission.
#include <gtest/gtest.h>

#include "rsp/connection.h"

using namespace gdbtrace::rsp;

namespace {
struct FakeTransport : Transport {
  std::string* written;
  ReadHandler pending;
  bool closed = false;
  explicit FakeTransport(std::string* w) : written(w) {}
  void async_read_some(ReadHandler h) override { pending = std::move(h); }
  std::error_code write_all(std::string_view d) override {
    written->append(d);
    return {};
  }
  // Like a real transport's pending read, which the io_context drops: the
  // handler holds the connection, so keeping it would be a reference cycle.
  void close() override {
    closed = true;
    pending = nullptr;
  }
  void deliver(std::string_view bytes) {
    auto h = std::move(pending);
    h({}, bytes);
  }
};
} // namespace

TEST(Connection, AcksAndReplies) {
  std::string out;
  auto* t = new FakeTransport(&out);
  auto conn = std::make_shared<Connection>(std::unique_ptr<Transport>(t), 100);
  std::vector<std::string> packets;
  conn->start({[&](std::string_view p) {
                 packets.emplace_back(p);
                 conn->send_packet("OK");
               },
               [] {}, [] {}});
  t->deliver("$?#3f");
  EXPECT_EQ(out, "+$OK#9a");
  out.clear();
  t->deliver("-"); // gdb asks for a retransmission
  EXPECT_EQ(out, "$OK#9a");
  out.clear();
  t->deliver("$qC#00"); // bad checksum
  EXPECT_EQ(out, "-");
  ASSERT_EQ(packets.size(), 1u);
  conn->close();
}

TEST(Connection, NoAckModeAndOversize) {
  std::string out;
  auto* t = new FakeTransport(&out);
  auto conn = std::make_shared<Connection>(std::unique_ptr<Transport>(t), 8);
  int interrupts = 0;
  conn->start({[&](std::string_view) { conn->send_packet("OK"); }, [&] { interrupts++; }, [] {}});
  conn->set_no_ack(true);
  t->deliver("$?#3f\x03");
  EXPECT_EQ(out, "$OK#9a");
  EXPECT_EQ(interrupts, 1);
  out.clear();
  t->deliver(frame_packet(std::string(50, 'm'), false));
  EXPECT_EQ(out, frame_packet("E.packet too long", true));
  conn->close();
}

TEST(Connection, CloseOnReadError) {
  std::string out;
  auto* t = new FakeTransport(&out);
  auto conn = std::make_shared<Connection>(std::unique_ptr<Transport>(t), 8);
  bool closed = false;
  conn->start({[](std::string_view) {}, [] {}, [&] { closed = true; }});
  auto h = std::move(t->pending);
  h(std::make_error_code(std::errc::connection_reset), {});
  EXPECT_TRUE(closed);
  EXPECT_TRUE(conn->closed());
  EXPECT_TRUE(t->closed);
}
