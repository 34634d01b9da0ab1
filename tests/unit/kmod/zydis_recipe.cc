#include "zydis_recipe.h"

#include <Zydis/Zydis.h>
#include <cstring>

namespace gdbtrace::kmod::test {

namespace {

// Zydis register -> gdb number (0..15), or -1.
int gdb_regnum(ZydisRegister r) {
  switch (ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r)) {
  case ZYDIS_REGISTER_RAX:
    return 0;
  case ZYDIS_REGISTER_RBX:
    return 1;
  case ZYDIS_REGISTER_RCX:
    return 2;
  case ZYDIS_REGISTER_RDX:
    return 3;
  case ZYDIS_REGISTER_RSI:
    return 4;
  case ZYDIS_REGISTER_RDI:
    return 5;
  case ZYDIS_REGISTER_RBP:
    return 6;
  case ZYDIS_REGISTER_RSP:
    return 7;
  case ZYDIS_REGISTER_R8:
    return 8;
  case ZYDIS_REGISTER_R9:
    return 9;
  case ZYDIS_REGISTER_R10:
    return 10;
  case ZYDIS_REGISTER_R11:
    return 11;
  case ZYDIS_REGISTER_R12:
    return 12;
  case ZYDIS_REGISTER_R13:
    return 13;
  case ZYDIS_REGISTER_R14:
    return 14;
  case ZYDIS_REGISTER_R15:
    return 15;
  default:
    return -1;
  }
}

bool is_gpr(const ZydisDecodedOperand& op) {
  return op.type == ZYDIS_OPERAND_TYPE_REGISTER && gdb_regnum(op.reg.value) >= 0 &&
         (op.size == 32 || op.size == 64);
}

// [rip+disp] or [gpr+disp], default segment, no index.
// LEA's operand is an address computation (AGEN), not an access.
bool simple_mem(const ZydisDecodedOperand& op, bool& rip, int& base, int64_t& disp,
                bool agen = false) {
  if (op.type != ZYDIS_OPERAND_TYPE_MEMORY || op.mem.index != ZYDIS_REGISTER_NONE)
    return false;
  if (agen ? op.mem.type != ZYDIS_MEMOP_TYPE_AGEN
           : (op.mem.type != ZYDIS_MEMOP_TYPE_MEM || (op.size != 32 && op.size != 64)))
    return false;
  rip = op.mem.base == ZYDIS_REGISTER_RIP;
  base = rip ? 0 : gdb_regnum(op.mem.base);
  if (!rip && (base < 0 || ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, op.mem.base) != 64))
    return false;
  disp = op.mem.disp.has_displacement ? op.mem.disp.value : 0;
  return true;
}

} // namespace

std::optional<gdbtrace_emu> zydis_emu_recipe(std::span<const uint8_t> bytes) {
  ZydisDecoder dec;
  ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  ZydisDecodedInstruction insn;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, bytes.data(), bytes.size(), &insn, ops)))
    return std::nullopt;
  // Any prefix but REX changes what the simple recipes mean.
  constexpr uint64_t kPrefixes =
      ZYDIS_ATTRIB_HAS_LOCK | ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE |
      ZYDIS_ATTRIB_HAS_REPNE | ZYDIS_ATTRIB_HAS_BND | ZYDIS_ATTRIB_HAS_XACQUIRE |
      ZYDIS_ATTRIB_HAS_XRELEASE | ZYDIS_ATTRIB_HAS_SEGMENT | ZYDIS_ATTRIB_HAS_OPERANDSIZE |
      ZYDIS_ATTRIB_HAS_ADDRESSSIZE | ZYDIS_ATTRIB_HAS_NOTRACK;
  if (insn.length > GDBTRACE_MAX_EMU || (insn.attributes & kPrefixes))
    return std::nullopt;

  gdbtrace_emu e{};
  e.insn_len = insn.length;
  std::memcpy(e.insn, bytes.data(), insn.length);
  const auto& a = ops[0];
  const auto& b = ops[1];
  const int nvis = insn.operand_count_visible;
  e.width = uint8_t(nvis > 0 ? a.size / 8 : 0);
  bool rip = false;
  int base = 0;
  int64_t disp = 0;

  switch (insn.mnemonic) {
  case ZYDIS_MNEMONIC_ENDBR64:
    e.op = GDBTRACE_EMU_ENDBR;
    e.width = 0;
    return e;
  case ZYDIS_MNEMONIC_MOV:
    if (nvis != 2)
      return std::nullopt;
    if (is_gpr(a) && is_gpr(b) && a.size == b.size) {
      e.op = GDBTRACE_EMU_MOV_REG_REG;
      e.dst = uint8_t(gdb_regnum(a.reg.value));
      e.src = uint8_t(gdb_regnum(b.reg.value));
    } else if (is_gpr(a) && b.type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
      e.op = GDBTRACE_EMU_MOV_IMM;
      e.dst = uint8_t(gdb_regnum(a.reg.value));
      e.imm = a.size == 32 ? int64_t(uint32_t(b.imm.value.u)) : int64_t(b.imm.value.u);
    } else if (is_gpr(a) && simple_mem(b, rip, base, disp) && a.size == b.size) {
      e.op = rip ? GDBTRACE_EMU_LOAD_RIP : GDBTRACE_EMU_LOAD;
      e.dst = uint8_t(gdb_regnum(a.reg.value));
      e.src = uint8_t(base);
      e.imm = disp;
    } else if (simple_mem(a, rip, base, disp) && is_gpr(b) && a.size == b.size) {
      e.op = rip ? GDBTRACE_EMU_STORE_RIP : GDBTRACE_EMU_STORE;
      e.dst = uint8_t(base);
      e.src = uint8_t(gdb_regnum(b.reg.value));
      e.imm = disp;
    } else {
      return std::nullopt;
    }
    return e;
  case ZYDIS_MNEMONIC_ADD:
  case ZYDIS_MNEMONIC_SUB:
    if (nvis != 2 || !is_gpr(a) || b.type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
      return std::nullopt;
    e.op = insn.mnemonic == ZYDIS_MNEMONIC_ADD ? GDBTRACE_EMU_ADD_IMM : GDBTRACE_EMU_SUB_IMM;
    e.dst = uint8_t(gdb_regnum(a.reg.value));
    // The immediate as the instruction sign-extends it (imm8/imm32 -> operand size).
    e.imm = b.imm.is_signed ? b.imm.value.s : int64_t(b.imm.value.u);
    if (a.size == 32)
      e.imm = int64_t(int32_t(uint32_t(e.imm)));
    return e;
  case ZYDIS_MNEMONIC_LEA:
    if (nvis != 2 || !is_gpr(a) || !simple_mem(b, rip, base, disp, true) || !rip)
      return std::nullopt;
    e.op = GDBTRACE_EMU_LEA_RIP;
    e.dst = uint8_t(gdb_regnum(a.reg.value));
    e.imm = disp;
    return e;
  default:
    return std::nullopt;
  }
}

std::optional<size_t> zydis_length(std::span<const uint8_t> bytes) {
  ZydisDecoder dec;
  ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  ZydisDecodedInstruction insn;
  if (!ZYAN_SUCCESS(
          ZydisDecoderDecodeInstruction(&dec, nullptr, bytes.data(), bytes.size(), &insn)))
    return std::nullopt;
  return insn.length;
}

} // namespace gdbtrace::kmod::test
