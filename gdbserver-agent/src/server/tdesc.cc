#include "server/tdesc.h"

#include "abi/amd64_regs.h"
#include "abi/i386_regs.h"

namespace gdbtrace {
namespace {

struct RegDesc {
  const char* name;
  const char* type;
  const char* group; // nullptr: default group
};

// Names and types from gdb/features/i386/64bit-{core,sse,linux,segments,avx}.xml,
// indexed by remote register number.
const RegDesc kRegs[GT_NUM_REGS_AVX] = {
    {"rax", "int64", nullptr},         {"rbx", "int64", nullptr},
    {"rcx", "int64", nullptr},         {"rdx", "int64", nullptr},
    {"rsi", "int64", nullptr},         {"rdi", "int64", nullptr},
    {"rbp", "data_ptr", nullptr},      {"rsp", "data_ptr", nullptr},
    {"r8", "int64", nullptr},          {"r9", "int64", nullptr},
    {"r10", "int64", nullptr},         {"r11", "int64", nullptr},
    {"r12", "int64", nullptr},         {"r13", "int64", nullptr},
    {"r14", "int64", nullptr},         {"r15", "int64", nullptr},
    {"rip", "code_ptr", nullptr},      {"eflags", "i386_eflags", nullptr},
    {"cs", "int32", nullptr},          {"ss", "int32", nullptr},
    {"ds", "int32", nullptr},          {"es", "int32", nullptr},
    {"fs", "int32", nullptr},          {"gs", "int32", nullptr},
    {"st0", "i387_ext", nullptr},      {"st1", "i387_ext", nullptr},
    {"st2", "i387_ext", nullptr},      {"st3", "i387_ext", nullptr},
    {"st4", "i387_ext", nullptr},      {"st5", "i387_ext", nullptr},
    {"st6", "i387_ext", nullptr},      {"st7", "i387_ext", nullptr},
    {"fctrl", "int", "float"},         {"fstat", "int", "float"},
    {"ftag", "int", "float"},          {"fiseg", "int", "float"},
    {"fioff", "int", "float"},         {"foseg", "int", "float"},
    {"fooff", "int", "float"},         {"fop", "int", "float"},
    {"xmm0", "vec128", nullptr},       {"xmm1", "vec128", nullptr},
    {"xmm2", "vec128", nullptr},       {"xmm3", "vec128", nullptr},
    {"xmm4", "vec128", nullptr},       {"xmm5", "vec128", nullptr},
    {"xmm6", "vec128", nullptr},       {"xmm7", "vec128", nullptr},
    {"xmm8", "vec128", nullptr},       {"xmm9", "vec128", nullptr},
    {"xmm10", "vec128", nullptr},      {"xmm11", "vec128", nullptr},
    {"xmm12", "vec128", nullptr},      {"xmm13", "vec128", nullptr},
    {"xmm14", "vec128", nullptr},      {"xmm15", "vec128", nullptr},
    {"mxcsr", "i386_mxcsr", "vector"}, {"orig_rax", "int", nullptr},
    {"fs_base", "int", nullptr},       {"gs_base", "int", nullptr},
    {"ymm0h", "uint128", nullptr},     {"ymm1h", "uint128", nullptr},
    {"ymm2h", "uint128", nullptr},     {"ymm3h", "uint128", nullptr},
    {"ymm4h", "uint128", nullptr},     {"ymm5h", "uint128", nullptr},
    {"ymm6h", "uint128", nullptr},     {"ymm7h", "uint128", nullptr},
    {"ymm8h", "uint128", nullptr},     {"ymm9h", "uint128", nullptr},
    {"ymm10h", "uint128", nullptr},    {"ymm11h", "uint128", nullptr},
    {"ymm12h", "uint128", nullptr},    {"ymm13h", "uint128", nullptr},
    {"ymm14h", "uint128", nullptr},    {"ymm15h", "uint128", nullptr},
};

// gdb/features/i386/32bit-{core,sse,linux,avx}.xml, indexed by i386 remote number.
const RegDesc kRegs32[GT32_NUM_REGS_AVX] = {
    {"eax", "int32", nullptr},         {"ecx", "int32", nullptr},
    {"edx", "int32", nullptr},         {"ebx", "int32", nullptr},
    {"esp", "data_ptr", nullptr},      {"ebp", "data_ptr", nullptr},
    {"esi", "int32", nullptr},         {"edi", "int32", nullptr},
    {"eip", "code_ptr", nullptr},      {"eflags", "i386_eflags", nullptr},
    {"cs", "int32", nullptr},          {"ss", "int32", nullptr},
    {"ds", "int32", nullptr},          {"es", "int32", nullptr},
    {"fs", "int32", nullptr},          {"gs", "int32", nullptr},
    {"st0", "i387_ext", nullptr},      {"st1", "i387_ext", nullptr},
    {"st2", "i387_ext", nullptr},      {"st3", "i387_ext", nullptr},
    {"st4", "i387_ext", nullptr},      {"st5", "i387_ext", nullptr},
    {"st6", "i387_ext", nullptr},      {"st7", "i387_ext", nullptr},
    {"fctrl", "int", "float"},         {"fstat", "int", "float"},
    {"ftag", "int", "float"},          {"fiseg", "int", "float"},
    {"fioff", "int", "float"},         {"foseg", "int", "float"},
    {"fooff", "int", "float"},         {"fop", "int", "float"},
    {"xmm0", "vec128", nullptr},       {"xmm1", "vec128", nullptr},
    {"xmm2", "vec128", nullptr},       {"xmm3", "vec128", nullptr},
    {"xmm4", "vec128", nullptr},       {"xmm5", "vec128", nullptr},
    {"xmm6", "vec128", nullptr},       {"xmm7", "vec128", nullptr},
    {"mxcsr", "i386_mxcsr", "vector"}, {"orig_eax", "int", nullptr},
    {"ymm0h", "uint128", nullptr},     {"ymm1h", "uint128", nullptr},
    {"ymm2h", "uint128", nullptr},     {"ymm3h", "uint128", nullptr},
    {"ymm4h", "uint128", nullptr},     {"ymm5h", "uint128", nullptr},
    {"ymm6h", "uint128", nullptr},     {"ymm7h", "uint128", nullptr},
};

const RegDesc& reg_desc(const RegisterLayout& layout, unsigned r) {
  return layout.i386() ? kRegs32[r] : kRegs[r];
}

// Remote register numbers: the g-packet order, or (with PRESENT) present
// registers first, then the absent ones, each group in that order.
std::vector<unsigned> remote_numbers(unsigned nregs, const std::vector<bool>& present) {
  std::vector<unsigned> number(nregs);
  unsigned next = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (unsigned r = 0; r < nregs; ++r) {
      bool is_present = present.empty() || (r < present.size() && present[r]);
      if (is_present == (pass == 0))
        number[r] = next++;
    }
  return number;
}

void append_regs(std::string& out, const RegisterLayout& layout, unsigned first, unsigned end,
                 const std::vector<unsigned>& number) {
  for (unsigned r = first; r < end; r++) {
    const RegDesc& d = reg_desc(layout, r);
    out += "    <reg name=\"";
    out += d.name;
    out += "\" bitsize=\"" + std::to_string(layout.size(r) * 8) + "\" type=\"" + d.type +
           "\" regnum=\"" + std::to_string(number[r]) + "\"";
    if (d.group)
      out += std::string(" group=\"") + d.group + "\"";
    out += "/>\n";
  }
}

// A <flags> type: one single-bit field per named bit ("NAME:BIT ..."; an
// empty name is allowed), as gdb's own 64bit-core.xml and 64bit-sse.xml spell
// them.
std::string flags_xml(const char* id, std::string_view bits) {
  std::string out = std::string("    <flags id=\"") + id + "\" size=\"4\">\n";
  while (!bits.empty()) {
    size_t end = bits.find(' ');
    std::string_view field = bits.substr(0, end);
    bits = end == std::string_view::npos ? std::string_view() : bits.substr(end + 1);
    size_t colon = field.find(':');
    std::string name(field.substr(0, colon)), at(field.substr(colon + 1));
    out += "      <field name=\"" + name + "\" start=\"" + at + "\" end=\"" + at + "\"/>\n";
  }
  return out + "    </flags>\n";
}

const std::string kEflags =
    flags_xml("i386_eflags", "CF:0 :1 PF:2 AF:4 ZF:6 SF:7 TF:8 IF:9 DF:10 "
                             "OF:11 NT:14 RF:16 VM:17 AC:18 VIF:19 VIP:20 ID:21");

const char* kSseTypes = R"(    <vector id="v8bf16" type="bfloat16" count="8"/>
    <vector id="v8h" type="ieee_half" count="8"/>
    <vector id="v4f" type="ieee_single" count="4"/>
    <vector id="v2d" type="ieee_double" count="2"/>
    <vector id="v16i8" type="int8" count="16"/>
    <vector id="v8i16" type="int16" count="8"/>
    <vector id="v4i32" type="int32" count="4"/>
    <vector id="v2i64" type="int64" count="2"/>
    <union id="vec128">
      <field name="v8_bfloat16" type="v8bf16"/>
      <field name="v8_half" type="v8h"/>
      <field name="v4_float" type="v4f"/>
      <field name="v2_double" type="v2d"/>
      <field name="v16_int8" type="v16i8"/>
      <field name="v8_int16" type="v8i16"/>
      <field name="v4_int32" type="v4i32"/>
      <field name="v2_int64" type="v2i64"/>
      <field name="uint128" type="uint128"/>
    </union>
)";

const std::string kMxcsr = flags_xml("i386_mxcsr", "IE:0 DE:1 ZE:2 OE:3 UE:4 PE:5 DAZ:6 IM:7 DM:8 "
                                                   "ZM:9 OM:10 UM:11 PM:12 FZ:15");

} // namespace

std::vector<std::string> registers_tfile_cannot_show(bool with_avx,
                                                     const std::vector<bool>& present) {
  std::vector<unsigned> gdb_order;
  for (unsigned r = GT_RAX; r <= GT_MXCSR; ++r)
    gdb_order.push_back(r);
  if (with_avx)
    for (unsigned r = GT_YMM0H; r < GT_NUM_REGS_AVX; ++r)
      gdb_order.push_back(r);
  gdb_order.insert(gdb_order.end(), {GT_FS_BASE, GT_GS_BASE, GT_ORIG_RAX});
  std::vector<std::string> lost;
  bool past_absent = false;
  for (unsigned r : gdb_order) {
    bool is_present = present.empty() || (r < present.size() && present[r]);
    if (!is_present)
      past_absent = true;
    else if (past_absent)
      lost.push_back(kRegs[r].name);
  }
  return lost;
}

std::string target_xml(const RegisterLayout& layout, const std::vector<bool>& present) {
  auto number = remote_numbers(layout.count(), present);
  // amd64: core, sse, linux, segments, avx; i386 (gdbserver's i386-linux): core, sse, linux, avx.
  struct Feature {
    const char* name;
    unsigned first, end;
  };
  const unsigned avx_end = layout.i386() ? GT32_NUM_REGS_AVX : GT_NUM_REGS_AVX;
  std::vector<Feature> features;
  if (layout.i386())
    features = {{"core", GT32_EAX, GT32_XMM0},
                {"sse", GT32_XMM0, GT32_ORIG_EAX},
                {"linux", GT32_ORIG_EAX, GT32_YMM0H}};
  else
    features = {{"core", GT_RAX, GT_XMM0},
                {"sse", GT_XMM0, GT_ORIG_RAX},
                {"linux", GT_ORIG_RAX, GT_FS_BASE},
                {"segments", GT_FS_BASE, GT_YMM0H}};
  if (layout.avx)
    features.push_back({"avx", layout.i386() ? unsigned(GT32_YMM0H) : unsigned(GT_YMM0H), avx_end});

  std::string out = "<?xml version=\"1.0\"?>\n<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n"
                    "<target>\n  <architecture>";
  out += layout.i386() ? "i386" : "i386:x86-64";
  out += "</architecture>\n  <osabi>GNU/Linux</osabi>\n";
  for (const Feature& f : features) {
    out += std::string("  <feature name=\"org.gnu.gdb.i386.") + f.name + "\">\n";
    if (f.first == 0)
      out += kEflags;
    if (std::string_view(f.name) == "sse") {
      out += kSseTypes;
      out += kMxcsr;
    }
    append_regs(out, layout, f.first, f.end, number);
    out += "  </feature>\n";
  }
  out += "</target>\n";
  return out;
}

} // namespace gdbtrace
