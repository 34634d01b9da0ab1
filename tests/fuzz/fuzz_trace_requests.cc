// libFuzzer target: the tracepoint packets' grammar (server/trace_requests.h)
// and the agent-expression verification every QTDP condition and action goes
// through. The first input byte picks the parser; the rest is the packet's
// arguments. Faster than fuzz_server_packets, so it goes deeper into QTDP.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/trace_requests.h"

using namespace gdbtrace;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  std::string_view args(reinterpret_cast<const char*>(data) + 1, size - 1);
  VerifyEnv env;
  env.num_regs = 87;
  env.tsv_exists = [](uint32_t n) { return n < 4; };
  switch (data[0] % 14) {
  case 0:
    (void)parse_qtdp(args, env);
    break;
  case 1:
    (void)parse_qtdp_actions(args, env);
    break;
  case 2:
    (void)parse_action_list(args, 1, env);
    break;
  case 3:
    (void)parse_qtdpsrc(args);
    break;
  case 4:
    (void)parse_qtdv(args);
    break;
  case 5:
    (void)parse_qtro(args);
    break;
  case 6:
    (void)parse_tracepoint_ref(args, "QTEnable");
    break;
  case 7:
    (void)parse_qtframe(args);
    break;
  case 8:
    (void)parse_hex_flag(args, "QTDisconnected");
    break;
  case 9:
    (void)parse_qtbuffer_size(args);
    break;
  case 10:
    (void)parse_qtnotes(args);
    break;
  case 11:
    (void)parse_qtsave(args);
    break;
  case 12:
    (void)parse_qtv(args);
    break;
  default:
    (void)parse_byte_range(args, "qTBuffer");
    break;
  }
  return 0;
}
