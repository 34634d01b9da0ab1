#include <gtest/gtest.h>

#include "server/cli.h"

using namespace gdbtrace;

static Result<CliOptions> parse(std::vector<std::string> argv) {
  return parse_cli(argv);
}

TEST(Cli, ProgramWithArgs) {
  auto o = parse({":1234", "/bin/echo", "a", "--b"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->comm.kind, CommSpec::Kind::Tcp);
  EXPECT_EQ(o->comm.host, "");
  EXPECT_EQ(o->comm.port, 1234);
  EXPECT_EQ(o->program, "/bin/echo");
  EXPECT_EQ(o->args, (std::vector<std::string>{"a", "--b"}));
}

TEST(Cli, Modes) {
  auto m = parse({"--multi", "--once", "0.0.0.0:0"});
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->multi);
  EXPECT_TRUE(m->once);
  EXPECT_EQ(m->comm.host, "0.0.0.0");
  EXPECT_EQ(m->comm.port, 0);
  EXPECT_TRUE(m->program.empty());

  auto a = parse({"--attach", "localhost:99", "1234"});
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->attach);
  EXPECT_EQ(a->attach_pid, 1234);
  EXPECT_FALSE(parse({"--attach", ":99", "12x"}));
  EXPECT_FALSE(parse({"--attach", ":99"}));
}

TEST(Cli, StdioAndDevice) {
  auto s = parse({"-", "prog"});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->comm.kind, CommSpec::Kind::Stdio);
  auto st = parse({"stdio", "prog"});
  ASSERT_TRUE(st);
  EXPECT_EQ(st->comm.kind, CommSpec::Kind::Stdio);
  auto d = parse({"/dev/ttyS0", "prog"});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->comm.kind, CommSpec::Kind::Device);
  EXPECT_EQ(d->comm.device, "/dev/ttyS0");
}

TEST(Cli, WrapperAndCompatOptions) {
  auto o = parse({"--wrapper", "env", "A=1", "--", "--no-startup-with-shell",
                  "--no-disable-randomization", "--debug", "--remote-debug", "--debug-format=all",
                  "--debug-file=/tmp/x", ":1", "prog"});
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_EQ(o->wrapper, (std::vector<std::string>{"env", "A=1"}));
  EXPECT_FALSE(o->startup_with_shell);
  EXPECT_FALSE(o->disable_randomization);
  EXPECT_TRUE(o->debug);
  EXPECT_TRUE(o->remote_debug);
  EXPECT_EQ(o->debug_file, "/tmp/x");
  EXPECT_FALSE(parse({"--wrapper", "env", ":1", "prog"})); // no terminating --
}

TEST(Cli, Errors) {
  EXPECT_FALSE(parse({}));
  EXPECT_FALSE(parse({":1234"})); // no program without --multi
  EXPECT_FALSE(parse({"--bogus", ":1", "p"}));
  EXPECT_FALSE(parse({":99999", "p"}));
  EXPECT_FALSE(parse({":12ab", "p"}));
  auto h = parse({"--help"});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->action, CliOptions::Action::Help);
  auto v = parse({"--version"});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->action, CliOptions::Action::Version);
  auto st = parse({"--selftest"}); // gdb.server/unittest.exp: answered as "disabled"
  ASSERT_TRUE(st);
  EXPECT_EQ(st->action, CliOptions::Action::Selftest);
}
