#include "jumppad/jumppad_site.h"

#include <cstring>
#include <string>

#include "abi/amd64_regs.h"
#include "abi/ax_opcodes.h"
#include "jumppad/jumppad_guard.h"
#include "jumppad/jumppad_layout.h"

extern "C" {
#include "x86/branch.h"
#include "x86/emulate.h"
}

namespace gdbtrace::jumppad {
namespace {

Error refuse(const std::string& why) {
  return Error{EOPNOTSUPP, why};
}

bool fits_rel32(int64_t v) {
  return v >= INT32_MIN && v <= INT32_MAX;
}

// A small x86-64 emitter: bytes, and rip-relative operands resolved against
// the pad's address in the tracee.
class Code {
public:
  explicit Code(uint64_t base) : base_(base) {}
  void bytes(std::initializer_list<uint8_t> b) { out_.insert(out_.end(), b); }
  void u32(uint32_t v) { append(&v, 4); }
  void u64(uint64_t v) { append(&v, 8); }
  // OPCODE bytes whose ModRM names [rip+disp32], then TAIL bytes (an
  // immediate) after the displacement: disp32 = target - end of instruction.
  bool rip(std::initializer_list<uint8_t> opcode, uint64_t target, unsigned tail_len = 0) {
    bytes(opcode);
    int64_t rel = int64_t(target - (here() + 4 + tail_len));
    u32(uint32_t(int32_t(rel)));
    return fits_rel32(rel);
  }
  size_t size() const { return out_.size(); }
  uint64_t here() const { return base_ + out_.size(); }
  // A jcc/jmp rel32 to be patched: returns where its rel32 is.
  size_t jump(std::initializer_list<uint8_t> opcode) {
    bytes(opcode);
    size_t at = out_.size();
    u32(0);
    return at;
  }
  void land(size_t rel_at) { patch(rel_at, out_.size()); } // the jump at REL_AT comes here
  void patch(size_t rel_at, size_t to) { // the jump whose rel32 is at REL_AT goes to TO
    int32_t rel = int32_t(to - (rel_at + 4));
    std::memcpy(out_.data() + rel_at, &rel, 4);
  }
  void jump_back(std::initializer_list<uint8_t> opcode, size_t to) {
    bytes(opcode);
    u32(uint32_t(int32_t(to - (out_.size() + 4))));
  }
  void append(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  std::vector<uint8_t> take() { return std::move(out_); }
  std::vector<FaultFixup> faults; // emit_memory_block's reads, for the stub's fixup table

private:
  uint64_t base_;
  std::vector<uint8_t> out_;
};

// Saves rflags and the 15 general registers below the red zone; rbx points at
// them afterwards (jumppad_layout.h Record::regs order).
void save_registers(Code& c) {
  c.bytes({0x48, 0x8d, 0x64, 0x24, 0x80});             // lea -128(%rsp),%rsp: skip the red zone
  c.bytes({0x9c});                                     // pushfq
  c.bytes({0x50, 0x53, 0x51, 0x52, 0x56, 0x57, 0x55}); // rax rbx rcx rdx rsi rdi rbp
  for (uint8_t r = 0; r < 8; ++r)
    c.bytes({0x41, uint8_t(0x50 + r)}); // r8..r15
  c.bytes({0x48, 0x89, 0xe3});          // mov %rsp,%rbx
}

// The pad changes only the arithmetic flags (no string instruction, no DF or
// TF write), so with SAHF those six are put back without popfq, which is
// microcoded: ~7 ns a hit on the development VM's Xeon, ~2 for this. OF
// first (sahf leaves it): the saved OF moved to bit 7 of %al, and %al + %al
// overflows exactly when it is set; then sahf loads SF ZF AF PF CF from the
// saved low byte. pop and lea leave the flags alone.
void restore_registers(Code& c, bool sahf) {
  for (int r = 7; r >= 0; --r)
    c.bytes({0x41, uint8_t(0x58 + r)});          // r15..r8
  c.bytes({0x5d, 0x5f, 0x5e, 0x5a, 0x59, 0x5b}); // rbp rdi rsi rdx rcx rbx
  if (sahf) {                                    // (%rsp) = rax, 8(%rsp) = rflags
    c.bytes({0x0f, 0xb6, 0x44, 0x24, 0x09});     // movzbl 9(%rsp),%eax   flags bits 8-15
    c.bytes({0x24, 0x08});                       // and $8,%al              OF (bit 11)
    c.bytes({0xc0, 0xe0, 0x04});                 // shl $4,%al              to bit 7
    c.bytes({0x00, 0xc0});                       // add %al,%al             OF = that bit
    c.bytes({0x8a, 0x64, 0x24, 0x08});           // mov 8(%rsp),%ah         flags bits 0-7
    c.bytes({0x9e});                             // sahf
    c.bytes({0x58});                             // pop %rax
    c.bytes({0x48, 0x8d, 0xa4, 0x24, 0x88, 0x00, 0x00, 0x00}); // lea 136(%rsp),%rsp
    return;
  }
  c.bytes({0x58, 0x9d});                                     // pop %rax; popfq
  c.bytes({0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00}); // lea 128(%rsp),%rsp
}

void emit_memory_block(Code& c, const PadSpec& s, const PadTracepoint& tp);

// The tracepoint's `teval $v = $v + k` actions: lock addq $k,tsv(%rip) each.
bool emit_tsv_adds(Code& c, const PadSpec& s, const PadTracepoint& tp) {
  bool ok = true;
  for (const auto& add : tp.tsv_adds) {
    ok &= c.rip({0xf0, 0x48, 0x81, 0x05}, s.area + kTsvOffset + 8ull * add.index, 4);
    c.u32(uint32_t(add.k));
  }
  return ok;
}

// Reserves a slot in this CPU's ring and writes the record; a full ring
// counts a drop. Clobbers rax rcx rdx rsi rdi r8-r11 (all saved).
bool emit_record(Code& c, const PadSpec& s, const PadTracepoint& tp) {
  const uint64_t slot_addr = s.area + kTpSlotsOffset + uint64_t(tp.tp_slot) * sizeof(TpSlot);
  bool ok = true;
  if (s.rdpid) {
    c.bytes({0x0f, 0x31});             // rdtsc: edx:eax TSC
    c.bytes({0xf3, 0x0f, 0xc7, 0xf9}); // rdpid %rcx: TSC_AUX (node<<12 | cpu), 20x cheaper
  } else {
    c.bytes({0x0f, 0x01, 0xf9}); // rdtscp: edx:eax TSC, ecx TSC_AUX
  }
  c.bytes({0x48, 0xc1, 0xe2, 0x20});                          // shl $32,%rdx
  c.bytes({0x48, 0x09, 0xd0});                                // or %rdx,%rax
  c.bytes({0x49, 0x89, 0xc0});                                // mov %rax,%r8            stamp
  c.bytes({0x81, 0xe1}), c.u32(0xfff);                        // and $0xfff,%ecx         cpu
  c.bytes({0x81, 0xe1}), c.u32(s.ring_mask);                  // and $mask,%ecx        ring
  c.bytes({0x49, 0x89, 0xca});                                // mov %rcx,%r10
  c.bytes({0x48, 0xc1, 0xe1, 0x06});                          // shl $6,%rcx
  ok &= c.rip({0x4c, 0x8d, 0x0d}, s.area + kRingHeadsOffset); // lea heads(%rip),%r9
  c.bytes({0x49, 0x01, 0xc9});                                // add %rcx,%r9            &head
  c.bytes({0x4d, 0x69, 0xd2}), c.u32(s.ring_stride);          // imul $stride,%r10,%r10
  ok &= c.rip({0x4c, 0x8d, 0x1d}, s.area + kRingOffset);      // lea rings(%rip),%r11
  c.bytes({0x4d, 0x01, 0xda});                                // add %r11,%r10           ring data
  const uint32_t nslots = record_slots(memory_bytes(tp.memory));
  const size_t retry = c.size();
  c.bytes({0x49, 0x8b, 0x01});                       // mov (%r9),%rax          pos
  c.bytes({0x48, 0x89, 0xc2});                       // mov %rax,%rdx
  c.bytes({0x48, 0x81, 0xe2}), c.u32(s.slot_mask);   // and $slot_mask,%rdx
  c.bytes({0x48, 0x8d, 0x14, 0x52});                 // lea (%rdx,%rdx,2),%rdx
  c.bytes({0x48, 0xc1, 0xe2, 0x06});                 // shl $6,%rdx             x 192
  c.bytes({0x4c, 0x01, 0xd2});                       // add %r10,%rdx           slot
  c.bytes({0x48, 0x8b, 0x32});                       // mov (%rdx),%rsi         seq
  c.bytes({0x48, 0x39, 0xc6});                       // cmp %rax,%rsi
  size_t to_take = c.jump({0x0f, 0x84});             // je take
  std::vector<size_t> to_full{c.jump({0x0f, 0x8c})}; // jl full: seq < pos
  c.jump_back({0xe9}, retry);                        // another thread took it: reload
  if (nslots == 2) { // the next position's slot must be free too: %rdi
    c.land(to_take);
    c.bytes({0x48, 0x8d, 0x48, 0x01});               // lea 1(%rax),%rcx
    c.bytes({0x48, 0x89, 0xcf});                     // mov %rcx,%rdi
    c.bytes({0x48, 0x81, 0xe7}), c.u32(s.slot_mask); // and $slot_mask,%rdi
    c.bytes({0x48, 0x8d, 0x3c, 0x7f});               // lea (%rdi,%rdi,2),%rdi
    c.bytes({0x48, 0xc1, 0xe7, 0x06});               // shl $6,%rdi
    c.bytes({0x4c, 0x01, 0xd7});                     // add %r10,%rdi           next slot
    c.bytes({0x48, 0x8b, 0x37});                     // mov (%rdi),%rsi         its seq
    c.bytes({0x48, 0x39, 0xce});                     // cmp %rcx,%rsi
    to_take = c.jump({0x0f, 0x84});                  // je take
    to_full.push_back(c.jump({0x0f, 0x8c}));         // jl full
    c.jump_back({0xe9}, retry);
  }
  c.land(to_take);
  c.bytes({0x48, 0x8d, 0x48, uint8_t(nslots)}); // lea nslots(%rax),%rcx
  c.bytes({0xf0, 0x49, 0x0f, 0xb1, 0x09});      // lock cmpxchg %rcx,(%r9)
  c.jump_back({0x0f, 0x85}, retry);             // jne retry
  if (nslots == 2)
    c.bytes({0x48, 0x89, 0x0f});     // mov %rcx,(%rdi)   the second position: seq = pos + 2 now
  c.bytes({0x4c, 0x89, 0x42, 0x08}); // mov %r8,8(%rdx)         stamp
  c.bytes({0xc7, 0x42, 0x10}), c.u32(tp.tp_slot | nslots << 16); // movl $slot|n<<16,16(%rdx)
  c.bytes({0x48, 0x8d, 0x41, uint8_t(1 - nslots)}); // lea 1-n(%rcx),%rax    (keep pos+1)
  // The 16 saved words one mov pair each: rep movsq costs ~10 ns to start on
  // the development VM's Xeon, these ~2.
  for (uint32_t i = 0; i < 16; ++i) {
    c.bytes({0x48, 0x8b, 0x73, uint8_t(8 * i)});                             // mov 8i(%rbx),%rsi
    c.bytes({0x48, 0x89, 0xb2}), c.u32(uint32_t(kRecordRegsOffset + 8 * i)); // mov %rsi,regs[i]
  }
  c.bytes({0x48, 0x8d, 0xb3}), c.u32(256); // lea 256(%rbx),%rsi  rsp
  c.bytes({0x48, 0x89, 0xb2}), c.u32(uint32_t(kRecordRegsOffset + 8 * 16)); // regs[16]
  c.bytes({0x48, 0xbe}), c.u64(s.site);                                     // movabs $site,%rsi
  c.bytes({0x48, 0x89, 0xb2}), c.u32(uint32_t(kRecordRegsOffset + 8 * 17)); // regs[17]
  if (!tp.memory.empty())
    emit_memory_block(c, s, tp); // keeps rax (pos + 1) and rdx (the slot)
  c.bytes({0x48, 0x89, 0x02});   // mov %rax,(%rdx)         commit: seq = pos + 1
  // The lines of the slot 16 positions ahead (3 KB), so a ring larger than the
  // caches is in them by the time a hit writes it: the stores of a slot that
  // missed to memory held up the next locked instruction. One slot ahead left
  // $rdi + a TSV at 46-49 ns a hit on the development VM, 16 ahead 33-38.
  const size_t used = tp.memory.empty() ? offsetof(Record, one_slot_mem)
                                        : record_mem_offset(nslots) + memory_bytes(tp.memory);
  for (uint32_t line = 0; line < used; line += 64)
    c.bytes({0x0f, 0x0d, 0x8a}), c.u32(16 * kSlotSize + line); // prefetchw slot+3K+line(%rdx)
  size_t to_done = c.jump({0xe9});
  for (size_t j : to_full)
    c.land(j);
  ok &= c.rip({0xf0, 0x48, 0xff, 0x05}, slot_addr + offsetof(TpSlot, drops)); // lock incq drops
  c.land(to_done);
  return ok;
}

// Where save_registers() put gdb's register N, as an index of Record::regs
// (rbx points at them); -1 for a register the pad does not save.
int saved_index(uint32_t regno) {
  switch (regno) {
  case GT_RAX:
    return 14;
  case GT_RBX:
    return 13;
  case GT_RCX:
    return 12;
  case GT_RDX:
    return 11;
  case GT_RSI:
    return 10;
  case GT_RDI:
    return 9;
  case GT_RBP:
    return 8;
  case GT_EFLAGS:
    return 15;
  default:
    return regno >= GT_R8 && regno <= GT_R15 ? int(7 - (regno - GT_R8)) : -1;
  }
}

// %rsi = where range R starts: its absolute address, or its base register's
// value at the site (saved block at rbx, rsp = rbx + 256, rip = the site) plus
// its offset. Only registers the pad saves get here (plan_actions refuses others).
void emit_range_address(Code& c, const PadSpec& s, const MemRange& r) {
  if (r.basereg < 0) {
    c.bytes({0x48, 0xbe}), c.u64(r.address); // movabs $address,%rsi
    return;
  }
  if (r.basereg == GT_RSP)
    c.bytes({0x48, 0x8d, 0xb3}), c.u32(256); // lea 256(%rbx),%rsi
  else if (r.basereg == GT_RIP)
    c.bytes({0x48, 0xbe}), c.u64(s.site); // movabs $site,%rsi
  else
    c.bytes({0x48, 0x8b, 0x73, uint8_t(8 * saved_index(uint32_t(r.basereg)))}); // mov 8i(%rbx),%rsi
  c.bytes({0x48, 0xb9}), c.u64(r.address); // movabs $offset,%rcx
  c.bytes({0x48, 0x01, 0xce});             // add %rcx,%rsi
}

// Copies R (its length in bytes, at %rsi) to the record's BASE + AT, in
// 8/4/2/1-byte loads through %rcx; LOADS gets each load's offset (a fault
// site, listed by the caller with the range's recovery).
void emit_range_copy(Code& c, const MemRange& r, size_t base, uint32_t at,
                     std::vector<size_t>& loads) {
  for (uint32_t k = 0; k < r.length;) {
    const uint32_t n = r.length - k >= 8 ? 8 : r.length - k >= 4 ? 4 : r.length - k >= 2 ? 2 : 1;
    const uint32_t dst = uint32_t(base) + at + k;
    loads.push_back(c.size());
    switch (n) { // mov k(%rsi),%rcx/%ecx/%cx/%cl; mov %rcx/..,dst(%rdx)
    case 8:
      c.bytes({0x48, 0x8b, 0x4e, uint8_t(k)}), c.bytes({0x48, 0x89, 0x8a}), c.u32(dst);
      break;
    case 4:
      c.bytes({0x8b, 0x4e, uint8_t(k)}), c.bytes({0x89, 0x8a}), c.u32(dst);
      break;
    case 2:
      c.bytes({0x66, 0x8b, 0x4e, uint8_t(k)}), c.bytes({0x66, 0x89, 0x8a}), c.u32(dst);
      break;
    default:
      c.bytes({0x8a, 0x4e, uint8_t(k)}), c.bytes({0x88, 0x8a}), c.u32(dst);
    }
    k += n;
  }
}

// The tracepoint's memory ranges into the reserved slot (%rdx), before the
// commit. Each read can fault: the stub, as ptracer, sees the SIGSEGV/SIGBUS
// stop, finds the load in the area's fixup table (c.faults) and moves the
// thread to the range's recovery code, which sets the range's bit in
// Record::mem_unreadable; the signal is suppressed. With the guard word's tid
// bits clear (the stub is gone, or detached: no one to fix a fault up) nothing
// is read and every range is marked. Clobbers rcx, rsi; keeps rax, rdx, rbx.
void emit_memory_block(Code& c, const PadSpec& s, const PadTracepoint& tp) {
  const uint32_t all = tp.memory.size() >= 32 ? ~0u : (1u << tp.memory.size()) - 1;
  c.bytes({0xc7, 0x42, uint8_t(offsetof(Record, mem_unreadable))}),
      c.u32(0);                                                          // movl $0,unreadable(%rdx)
  c.rip({0xf7, 0x05}, s.area + kGuardOffset, 4), c.u32(guard::kTidMask); // testl $tid,guard(%rip)
  const size_t to_reads = c.jump({0x0f, 0x85});                          // jnz reads
  c.bytes({0xc7, 0x42, uint8_t(offsetof(Record, mem_unreadable))}), c.u32(all); // all unreadable
  const size_t to_done = c.jump({0xe9});
  c.land(to_reads);
  uint32_t at = 0;
  for (size_t i = 0; i < tp.memory.size(); ++i) {
    const MemRange& r = tp.memory[i];
    std::vector<size_t> loads;
    emit_range_address(c, s, r);
    emit_range_copy(c, r, record_mem_offset(record_slots(memory_bytes(tp.memory))), at, loads);
    c.bytes({0xeb, 0x07}); // jmp over the recovery
    const size_t recovery = c.size();
    c.bytes({0x81, 0x4a, uint8_t(offsetof(Record, mem_unreadable))}), c.u32(1u << i); // orl $bit
    for (size_t l : loads)
      c.faults.push_back({uint32_t(l), uint32_t(recovery)});
    at += r.length;
  }
  c.land(to_done);
}

uint64_t operand(const std::vector<uint8_t>& code, size_t at, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i)
    v = v << 8 | code[at + i];
  return v;
}

// Where a condition's jumps go, patched once every instruction is emitted.
struct ConditionJumps {
  std::vector<std::pair<size_t, uint32_t>> to_pc; // rel32 position, AX target
  std::vector<size_t> to_end;                     // rel32 positions of jumps to the end
};

// One AX instruction OP (operand K; DEPTH values on the stack before it) of a
// condition at SITE.
Result<void> emit_condition_op(Code& c, const struct ax_opinfo* info, uint8_t op, uint64_t k,
                               int depth, uint64_t site, ConditionJumps& j) {
  auto binary = [&](std::initializer_list<uint8_t> insn) {
    c.bytes({0x59, 0x58}); // pop %rcx (b); pop %rax (a)
    c.bytes(insn);
    c.bytes({0x50}); // push %rax
  };
  auto compare = [&](uint8_t setcc) {
    c.bytes({0x59, 0x58, 0x48, 0x39, 0xc8});              // pop %rcx; pop %rax; cmp %rcx,%rax
    c.bytes({0x0f, setcc, 0xc0, 0x0f, 0xb6, 0xc0, 0x50}); // setcc %al; movzbl %al,%eax; push
  };
  switch (op) {
  case AX_OP_CONST8:
  case AX_OP_CONST16:
  case AX_OP_CONST32:
  case AX_OP_CONST64:
    c.bytes({0x48, 0xb8}), c.u64(k), c.bytes({0x50}); // movabs $k,%rax; push %rax
    break;
  case AX_OP_REG:
    if (k == GT_RSP)
      c.bytes({0x48, 0x8d, 0x83}), c.u32(256), c.bytes({0x50}); // lea 256(%rbx),%rax; push
    else if (k == GT_RIP)
      c.bytes({0x48, 0xb8}), c.u64(site), c.bytes({0x50});
    else if (int i = saved_index(uint32_t(k)); i >= 0)
      c.bytes({0xff, 0x73, uint8_t(8 * i)}); // push 8*i(%rbx)
    else
      return refuse("the condition reads register " + std::to_string(k) +
                    ", which the jump pad does not save");
    break;
  case AX_OP_ADD:
    binary({0x48, 0x01, 0xc8});
    break; // add %rcx,%rax
  case AX_OP_SUB:
    binary({0x48, 0x29, 0xc8});
    break; // sub %rcx,%rax
  case AX_OP_MUL:
    binary({0x48, 0x0f, 0xaf, 0xc1});
    break; // imul %rcx,%rax
  case AX_OP_BIT_AND:
    binary({0x48, 0x21, 0xc8});
    break;
  case AX_OP_BIT_OR:
    binary({0x48, 0x09, 0xc8});
    break;
  case AX_OP_BIT_XOR:
    binary({0x48, 0x31, 0xc8});
    break;
  // x86 masks a shift count to 6 bits; ax_eval gives 0 (or the sign) from 64 on.
  case AX_OP_LSH: // cmp $64,%rcx; sbb %rdx,%rdx (all ones below 64); shl %cl,%rax; and %rdx,%rax
  case AX_OP_RSH_UNSIGNED:
    binary({0x48, 0x83, 0xf9, 0x40, 0x48, 0x19, 0xd2, 0x48, 0xd3,
            uint8_t(op == AX_OP_LSH ? 0xe0 : 0xe8), 0x48, 0x21, 0xd0});
    break;
  case AX_OP_RSH_SIGNED: // mov $63,%edx; cmp %rdx,%rcx; cmova %rdx,%rcx; sar %cl,%rax
    binary({0xba, 63, 0, 0, 0, 0x48, 0x39, 0xd1, 0x48, 0x0f, 0x47, 0xca, 0x48, 0xd3, 0xf8});
    break;
  case AX_OP_EQUAL:
    compare(0x94);
    break; // sete
  case AX_OP_LESS_SIGNED:
    compare(0x9c);
    break; // setl
  case AX_OP_LESS_UNSIGNED:
    compare(0x92);
    break; // setb
  case AX_OP_BIT_NOT:
    c.bytes({0x58, 0x48, 0xf7, 0xd0, 0x50});
    break;            // pop; not %rax; push
  case AX_OP_LOG_NOT: // pop; test %rax,%rax; sete %al; movzbl %al,%eax; push
    c.bytes({0x58, 0x48, 0x85, 0xc0, 0x0f, 0x94, 0xc0, 0x0f, 0xb6, 0xc0, 0x50});
    break;
  case AX_OP_EXT:
  case AX_OP_ZERO_EXT:
    if (k == 0)
      c.bytes({0x58, 0x31, 0xc0, 0x50}); // pop; xor %eax,%eax; push
    else if (k < 64)                     // pop; shl $64-k,%rax; sar/shr $64-k,%rax; push
      c.bytes({0x58, 0x48, 0xc1, 0xe0, uint8_t(64 - k), 0x48, 0xc1,
               uint8_t(op == AX_OP_EXT ? 0xf8 : 0xe8), uint8_t(64 - k), 0x50});
    break;
  case AX_OP_DUP:
    c.bytes({0xff, 0x34, 0x24});
    break; // push (%rsp)
  case AX_OP_POP:
    c.bytes({0x48, 0x83, 0xc4, 0x08});
    break; // add $8,%rsp
  case AX_OP_SWAP:
    c.bytes({0x58, 0x59, 0x50, 0x51});
    break;            // pop rax; pop rcx; push rax; push rcx
  case AX_OP_IF_GOTO: // pop %rax; test %rax,%rax; jne target
    c.bytes({0x58, 0x48, 0x85, 0xc0});
    j.to_pc.push_back({c.jump({0x0f, 0x85}), uint32_t(k)});
    break;
  case AX_OP_GOTO:
    j.to_pc.push_back({c.jump({0xe9}), uint32_t(k)});
    break;
  case AX_OP_END:
    if (depth > 0)
      c.bytes({0x58}); // pop %rax: the result
    else
      c.bytes({0x31, 0xc0}); // an empty stack gives 0
    j.to_end.push_back(c.jump({0xe9}));
    break;
  default:
    return refuse(std::string("the condition uses `") + info->name +
                  "`, which the jump pad does not compile");
  }
  return ok();
}

// The condition as x86-64: every AX value on the thread's stack below the
// saved registers (push/pop; rax and rcx are scratch), with the semantics of
// ax_eval (shift counts of 64 and more, ext of 0 bits). At `end` the top value
// (0 for an empty stack) decides, rsp is reset to the saved registers, and a
// false condition jumps to the fixup *FALSE_AT. SITE is the tracepoint's
// address ($pc). Emits nothing useful on error: the caller refuses the pad.
Result<void> emit_condition(Code& c, const AgentExpr& e, uint64_t site, size_t* false_at) {
  if (e.info.has_backward_jump)
    return refuse("the condition loops (the jump pad compiles no backward jump)");
  if (e.info.uses_mem)
    return refuse("the condition reads memory (the jump pad has no checked read yet: a bad "
                  "pointer must not crash the tracee)");
  if (e.info.uses_tsv)
    return refuse("the condition uses a trace state variable (not compiled by the jump pad yet)");
  if (e.info.max_stack > kMaxConditionStack)
    return refuse("the condition needs more than " + std::to_string(kMaxConditionStack) +
                  " stack entries");
  const auto& code = e.code;
  std::vector<size_t> native(code.size() + 1, SIZE_MAX);
  ConditionJumps j;
  for (size_t pc = 0; pc < code.size();) {
    const uint8_t op = code[pc];
    const struct ax_opinfo* info = ax_opinfo(op);
    if (!info)
      return refuse("the condition has an unknown opcode");
    const uint64_t k = operand(code, pc + 1, info->operand_bytes);
    native[pc] = c.size();
    if (auto r = emit_condition_op(c, info, op, k, pc < e.depth.size() ? e.depth[pc] : 0, site, j);
        !r)
      return r;
    pc += 1 + info->operand_bytes;
  }
  for (auto [rel_at, target] : j.to_pc) {
    if (target >= native.size() || native[target] == SIZE_MAX)
      return refuse("the condition jumps into the middle of an instruction");
    c.patch(rel_at, native[target]);
  }
  for (size_t at : j.to_end)
    c.land(at);
  c.bytes({0x48, 0x89, 0xdc});      // mov %rbx,%rsp: drop whatever the program left
  c.bytes({0x48, 0x85, 0xc0});      // test %rax,%rax
  *false_at = c.jump({0x0f, 0x84}); // je: false
  return ok();
}

// jmp *0(%rip); .quad TARGET: reaches anywhere, touches no register or flag.
void jmp_absolute(std::vector<uint8_t>& o, uint64_t target) {
  o.insert(o.end(), {0xff, 0x25, 0, 0, 0, 0});
  for (int i = 0; i < 8; ++i)
    o.push_back(uint8_t(target >> (8 * i)));
}

// What a call pushes, without touching a register or a flag: lea -8(%rsp),%rsp;
// movl $lo,(%rsp); movl $hi,4(%rsp).
void push_return(std::vector<uint8_t>& o, uint64_t ret) {
  o.insert(o.end(), {0x48, 0x8d, 0x64, 0x24, 0xf8, 0xc7, 0x04, 0x24});
  for (int i = 0; i < 4; ++i)
    o.push_back(uint8_t(ret >> (8 * i)));
  o.insert(o.end(), {0xc7, 0x44, 0x24, 0x04});
  for (int i = 4; i < 8; ++i)
    o.push_back(uint8_t(ret >> (8 * i)));
}

// The site's branch run from AT: where it goes is computed from the site's
// address; an indirect one reads the same pointer (a GOT entry lazy binding may
// still rewrite), so that pointer must be within rel32 of the pad.
Result<std::vector<uint8_t>> relocate_branch(const SitePlan& plan, uint64_t site, uint64_t at) {
  int32_t disp = 0;
  std::memcpy(&disp, plan.insn.data() + plan.insn.size() - 4, 4);
  const uint64_t next = site + plan.insn.size();
  const uint64_t target = next + int64_t(disp); // the destination, or where it is read from
  std::vector<uint8_t> o;
  if (plan.pushes_return())
    push_return(o, next);
  switch (plan.branch) {
  case GT_BRANCH_CALL_REL:
  case GT_BRANCH_JMP_REL:
    jmp_absolute(o, target);
    break;
  case GT_BRANCH_JCC_REL: // jcc over the fall-through jump to the taken one
    o.insert(o.end(), {uint8_t(0x70 | plan.cc), 14});
    jmp_absolute(o, next);
    jmp_absolute(o, target);
    break;
  case GT_BRANCH_CALL_RIP:
  case GT_BRANCH_JMP_RIP: { // jmp *disp(%rip), the same pointer
    const int64_t rel = int64_t(target - (at + o.size() + 6));
    if (!fits_rel32(rel))
      return refuse("the site's branch reads its target out of the pad's reach");
    o.insert(o.end(), {0xff, 0x25});
    for (int i = 0; i < 4; ++i)
      o.push_back(uint8_t(uint32_t(int32_t(rel)) >> (8 * i)));
    break;
  }
  default:
    return refuse("unknown branch kind at the site");
  }
  return o;
}

} // namespace

bool SitePlan::pushes_return() const {
  return branch == GT_BRANCH_CALL_REL || branch == GT_BRANCH_CALL_RIP;
}

Result<SitePlan> plan_site(std::span<const uint8_t> bytes) {
  gt_branch br{};
  if (gt_branch_decode(bytes.data(), uint32_t(bytes.size()), &br) == 0) {
    SitePlan plan;
    plan.insn.assign(bytes.begin(), bytes.begin() + br.len);
    plan.branch = br.kind;
    plan.cc = br.cc;
    return plan;
  }
  gdbtrace_emu emu{};
  if (gt_emu_decode(bytes.data(), uint32_t(bytes.size()), &emu) != 0)
    return refuse("the instruction at the site is not one the jump pad relocates (mov/lea "
                  "reg/imm/memory, add/sub imm, call/jmp/jcc rel32 or *[rip]: shared/x86 "
                  "decoder)");
  if (emu.insn_len < kJumpLen)
    return refuse("the instruction at the site is " + std::to_string(emu.insn_len) +
                  " bytes; the jump needs " + std::to_string(kJumpLen));
  SitePlan plan;
  plan.insn.assign(bytes.begin(), bytes.begin() + emu.insn_len);
  switch (emu.op) {
  case GDBTRACE_EMU_LEA_RIP:
  case GDBTRACE_EMU_LOAD_RIP:
  case GDBTRACE_EMU_STORE_RIP:
    // These forms end with the disp32 (no immediate follows it).
    plan.disp_at = int(emu.insn_len) - 4;
    break;
  default:
    break;
  }
  return plan;
}

Result<std::vector<uint8_t>> relocate(const SitePlan& plan, uint64_t site, uint64_t at) {
  if (plan.branch)
    return relocate_branch(plan, site, at);
  std::vector<uint8_t> out = plan.insn;
  if (plan.disp_at < 0)
    return out;
  int32_t disp = 0;
  std::memcpy(&disp, out.data() + plan.disp_at, 4);
  const uint64_t target = site + plan.insn.size() + int64_t(disp);
  const int64_t rel = int64_t(target - (at + plan.insn.size()));
  if (!fits_rel32(rel))
    return refuse("the site's rip-relative operand is out of the pad's reach");
  int32_t nd = int32_t(rel);
  std::memcpy(out.data() + plan.disp_at, &nd, 4);
  return out;
}

Result<std::vector<uint8_t>> emit_pad(const PadSpec& s, std::vector<FaultFixup>* fixups) {
  Code c(s.pad);
  bool ok = true;
  save_registers(c);
  ok &= c.rip({0x83, 0x3d}, s.armed, 1); // cmpl $0,armed(%rip)
  c.bytes({0x00});
  size_t to_restore = c.jump({0x0f, 0x84}); // je restore
  for (const PadTracepoint& tp : s.tps) {
    const uint64_t slot = s.area + kTpSlotsOffset + uint64_t(tp.tp_slot) * sizeof(TpSlot);
    ok &= c.rip({0x83, 0x3d}, slot + offsetof(TpSlot, enabled), 1); // cmpl $0,enabled(%rip)
    c.bytes({0x00});
    size_t to_next = c.jump({0x0f, 0x84}); // je next
    size_t cond_false = SIZE_MAX;
    if (tp.condition)
      if (auto r = emit_condition(c, *tp.condition, s.site, &cond_false); !r)
        return r.error();
    // A recording tracepoint's hits are its records plus its drops, counted by
    // the stub: no locked add per hit on one line every CPU shares.
    if (!tp.record)
      ok &= c.rip({0xf0, 0x48, 0xff, 0x05}, slot + offsetof(TpSlot, hits)); // lock incq hits
    // A recording tracepoint's TSV adds are not done here: its hits are its
    // records plus its drops, so the stub adds k for each (jumppad_collector.cc
    // tsv_value). A locked add per hit cost 5-16 ns: a full fence that waits
    // for the previous hit's record stores.
    if (tp.record)
      ok &= emit_record(c, s, tp);
    else
      ok &= emit_tsv_adds(c, s, tp);
    c.land(to_next);
    if (cond_false != SIZE_MAX)
      c.land(cond_false);
  }
  c.land(to_restore);
  restore_registers(c, s.sahf);
  auto insn = relocate(s.plan, s.site, c.here());
  if (!insn)
    return insn.error();
  c.append(insn->data(), insn->size());
  if (!s.plan.branch)
    ok &= c.rip({0xe9}, s.site + s.plan.insn.size()); // jmp back after the site
  if (!ok)
    return refuse("the pad is out of rel32 reach of the site or its area");
  if (fixups)
    *fixups = c.faults;
  return c.take();
}

Result<std::array<uint8_t, kJumpLen>> site_jump(uint64_t site, uint64_t pad) {
  int64_t rel = int64_t(pad - (site + kJumpLen));
  if (!fits_rel32(rel))
    return refuse("the pad is more than 2 GB from the site");
  std::array<uint8_t, kJumpLen> j{0xe9};
  int32_t r = int32_t(rel);
  std::memcpy(j.data() + 1, &r, 4);
  return j;
}

Result<void> check_condition(const AgentExpr& e) {
  Code scratch(0);
  size_t false_at = 0;
  return emit_condition(scratch, e, 0, &false_at);
}

} // namespace gdbtrace::jumppad
