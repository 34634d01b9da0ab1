#include "unwind/stack_unwinder.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "abi/amd64_regs.h"
#include "common/hex.h"
#include "trace/frame.h"
#include "unwind/process_modules.h"

namespace gdbtrace {

namespace {

// DWARF register numbers of x86-64 (psABI): rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip.
constexpr unsigned kDwarfToRemote[17] = {GT_RAX, GT_RDX, GT_RCX, GT_RBX, GT_RSI, GT_RDI,
                                         GT_RBP, GT_RSP, GT_R8,  GT_R9,  GT_R10, GT_R11,
                                         GT_R12, GT_R13, GT_R14, GT_R15, GT_RIP};

// A stack deeper than this is cut (a corrupt snapshot can loop).
constexpr size_t kMaxDepth = 256;

// The name people know: demangled, without the symbol version
// ("__libc_start_main@@GLIBC_2.34" is __libc_start_main).
std::string display_name(const char* symbol) {
  if (!symbol)
    return {};
  std::string name = symbol;
  if (size_t at = name.find('@'); at != std::string::npos && at > 0)
    name.resize(at);
  if (!name.starts_with("_Z"))
    return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status == 0 && out)
    name = out;
  std::free(out);
  return name;
}

std::string base_name(const char* path) {
  if (!path)
    return {};
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// Whether ELF holds a full symbol table: .symtab, or .gnu_debugdata (an LZMA
// .symtab that libdw reads, "MiniDebugInfo").
bool has_symtab(Elf* elf) {
  size_t names = 0;
  if (!elf || elf_getshdrstrndx(elf, &names) != 0)
    return false;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr))
      continue;
    const char* name = elf_strptr(elf, names, shdr.sh_name);
    if (shdr.sh_type == SHT_SYMTAB || (name && std::strcmp(name, ".gnu_debugdata") == 0))
      return true;
  }
  return false;
}

// "full", "dynamic", "none" or "unreadable" (ModuleInfo::symbols): the tables
// libdw names a module's pcs from. The separate debug file counts: libdw takes
// its .symtab.
const char* symbol_kind(Dwfl_Module* mod) {
  Dwarf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(mod, &bias);
  if (!elf)
    return "unreadable";
  if (has_symtab(elf))
    return "full";
  if (Dwarf* dwarf = dwfl_module_getdwarf(mod, &bias); dwarf && has_symtab(dwarf_getelf(dwarf)))
    return "full";
  return dwfl_module_getsymtab(mod) > 0 ? "dynamic" : "none";
}

struct MemoryBlock {
  uint64_t address;
  const uint8_t* data;
  uint32_t length;
};

} // namespace

const char* stack_status_word(UnwoundStack::Status s) {
  switch (s) {
  case UnwoundStack::Complete:
    return "ok";
  case UnwoundStack::Truncated:
    return "truncated";
  case UnwoundStack::NoSnapshot:
    return "nostack";
  case UnwoundStack::Failed:
    return "error";
  }
  return "error";
}

struct StackUnwinder::Impl {
  ProcessModules modules;
  Dwfl* dwfl = nullptr;
  bool attached = false;
  std::unordered_map<uint64_t, StackEntry> symbols; // by lookup pc
  std::vector<ModuleInfo> module_infos;             // by StackEntry::module_id
  std::unordered_map<Dwfl_Module*, int> module_ids;

  // The frame being unwound (set for the duration of one unwind()).
  Dwarf_Word regs[17] = {};
  std::vector<MemoryBlock> memory; // sorted by address
  bool missed_memory = false;
  bool stopped_deep = false;
  uint64_t no_cfi_pc = 0;
  UnwoundStack* out = nullptr;
  std::unordered_map<uint64_t, bool> cfi_known; // by lookup pc

  ~Impl() { close(); }

  void close() {
    if (dwfl)
      dwfl_end(dwfl);
    dwfl = nullptr;
    attached = false;
    symbols.clear();
    cfi_known.clear();
    module_infos.clear();
    module_ids.clear();
  }

  Result<void> rebuild() {
    close();
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = nullptr,
        .debuginfo_path = nullptr,
    };
    dwfl = dwfl_begin(&callbacks);
    if (!dwfl)
      return make_error(ENOMEM, std::string("libdw: ") + dwfl_errmsg(-1));
    const std::string& maps = modules.maps();
    FILE* f = fmemopen(const_cast<char*>(maps.data()), maps.size(), "r");
    if (!f)
      return make_error(errno, "fmemopen");
    dwfl_report_begin(dwfl);
    int rc = dwfl_linux_proc_maps_report(dwfl, f);
    std::fclose(f);
    dwfl_report_end(dwfl, nullptr, nullptr);
    if (rc != 0)
      return make_error(EINVAL, std::string("libdw: reading the module list: ") +
                                    (rc > 0 ? std::strerror(rc) : dwfl_errmsg(-1)));
    static const Dwfl_Thread_Callbacks thread_callbacks = {
        .next_thread = next_thread,
        .get_thread = nullptr,
        .memory_read = memory_read,
        .set_initial_registers = set_initial_registers,
        .detach = nullptr,
        .thread_detach = nullptr,
    };
    if (!dwfl_attach_state(dwfl, nullptr, modules.pid(), &thread_callbacks, this))
      return make_error(EINVAL, std::string("libdw: ") + dwfl_errmsg(-1));
    attached = true;
    return ok();
  }

  // One thread: the one whose registers the frame holds.
  static pid_t next_thread(Dwfl*, void* arg, void** thread_arg) {
    auto* self = static_cast<Impl*>(arg);
    if (*thread_arg)
      return 0;
    *thread_arg = self;
    return self->modules.pid();
  }

  static bool set_initial_registers(Dwfl_Thread* thread, void* arg) {
    auto* self = static_cast<Impl*>(arg);
    return dwfl_thread_state_registers(thread, 0, 17, self->regs);
  }

  static bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
    auto* self = static_cast<Impl*>(arg);
    auto it = std::upper_bound(self->memory.begin(), self->memory.end(), addr,
                               [](uint64_t a, const MemoryBlock& b) { return a < b.address; });
    if (it != self->memory.begin()) {
      --it;
      if (addr - it->address + sizeof(Dwarf_Word) <= it->length) {
        std::memcpy(result, it->data + (addr - it->address), sizeof(Dwarf_Word));
        return true;
      }
    }
    self->missed_memory = true;
    return false;
  }

  static int on_frame(Dwfl_Frame* frame, void* arg) {
    auto* self = static_cast<Impl*>(arg);
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!dwfl_frame_pc(frame, &pc, &activation))
      return DWARF_CB_ABORT;
    // A return address points after the call: look up the call itself.
    uint64_t lookup = activation ? pc : pc - 1;
    StackEntry e = self->symbolize(lookup);
    e.pc = pc;
    self->out->entries.push_back(std::move(e));
    if (self->out->entries.size() >= kMaxDepth) {
      self->stopped_deep = true;
      return DWARF_CB_ABORT;
    }
    // Without CFI for this pc libdw would find the caller by following %rbp
    // (its frame-pointer fallback), which in code built without frame
    // pointers is any value: a made-up caller. Stop here instead.
    if (!self->has_cfi(lookup)) {
      self->no_cfi_pc = pc;
      return DWARF_CB_ABORT;
    }
    return DWARF_CB_OK;
  }

  // Whether a module's .eh_frame or .debug_frame describes PC (cached per pc).
  bool has_cfi(uint64_t pc) {
    if (auto it = cfi_known.find(pc); it != cfi_known.end())
      return it->second;
    bool found = false;
    if (Dwfl_Module* mod = dwfl_addrmodule(dwfl, pc)) {
      for (int pass = 0; pass < 2 && !found; ++pass) {
        Dwarf_Addr bias = 0;
        Dwarf_CFI* cfi =
            pass == 0 ? dwfl_module_eh_cfi(mod, &bias) : dwfl_module_dwarf_cfi(mod, &bias);
        Dwarf_Frame* frame = nullptr;
        if (cfi && dwarf_cfi_addrframe(cfi, pc - bias, &frame) == 0) {
          found = true;
          std::free(frame);
        }
      }
    }
    cfi_known.emplace(pc, found);
    return found;
  }

  StackEntry symbolize(uint64_t pc) {
    if (auto it = symbols.find(pc); it != symbols.end())
      return it->second;
    StackEntry e;
    if (Dwfl_Module* mod = dwfl_addrmodule(dwfl, pc)) {
      const char* file = nullptr;
      const char* name =
          dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, &file, nullptr);
      e.module = base_name(file ? file : name);
      e.module_id = module_id(mod, name);
      Dwarf_Addr bias = 0;
      if (dwfl_module_getelf(mod, &bias)) {
        e.offset = pc - bias;
        e.has_offset = true;
      }
      GElf_Off offset = 0;
      GElf_Sym sym;
      e.function =
          display_name(dwfl_module_addrinfo(mod, pc, &offset, &sym, nullptr, nullptr, nullptr));
      if (Dwfl_Line* line = dwfl_module_getsrc(mod, pc)) {
        int lineno = 0;
        if (const char* src = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr))
          e.source = base_name(src) + ":" + std::to_string(lineno);
      }
    }
    symbols.emplace(pc, e);
    return e;
  }

  // The id of MOD's ModuleInfo (made at its first pc). NAME: its path in the
  // maps the module list was reported from.
  int module_id(Dwfl_Module* mod, const char* name) {
    auto [it, added] = module_ids.emplace(mod, static_cast<int>(module_infos.size()));
    if (!added)
      return it->second;
    ModuleInfo info;
    info.path = name ? name : "";
    info.symbols = symbol_kind(mod); // opens the ELF first: the build-id is read from it
    const unsigned char* bits = nullptr;
    GElf_Addr note = 0;
    int len = dwfl_module_build_id(mod, &bits, &note);
    if (len > 0)
      info.build_id = hex::encode(bits, static_cast<size_t>(len));
    module_infos.push_back(std::move(info));
    return it->second;
  }
};

StackUnwinder::StackUnwinder() : impl_(std::make_unique<Impl>()) {}
StackUnwinder::~StackUnwinder() = default;

Result<void> StackUnwinder::refresh_modules(int pid) {
  auto changed = impl_->modules.refresh(pid);
  if (!changed)
    return impl_->attached ? ok() : Result<void>(changed.error());
  if (*changed || !impl_->attached)
    return impl_->rebuild();
  return ok();
}

const ModuleInfo& StackUnwinder::module(int id) const {
  return impl_->module_infos.at(static_cast<size_t>(id));
}

bool StackUnwinder::has_modules() const {
  return impl_->attached;
}

UnwoundStack StackUnwinder::unwind(std::span<const uint8_t> frame, uint32_t regblock_size) {
  UnwoundStack out;
  Impl& m = *impl_;
  FrameView view(frame, regblock_size);
  m.memory.clear();
  const uint8_t* regs = nullptr;
  bool ok = view.for_each([&](const FrameBlock& b) {
    if (b.type == GT_TFRAME_REGS && !regs)
      regs = b.data;
    else if (b.type == GT_TFRAME_MEM && b.length)
      m.memory.push_back({b.address, b.data, b.length});
    return true;
  });
  if (!ok) {
    out.status = UnwoundStack::Failed;
    out.error = "malformed frame";
    return out;
  }
  if (!regs)
    return out; // NoSnapshot
  if (!m.attached) {
    out.status = UnwoundStack::Failed;
    out.error = "no module list of the traced process";
    return out;
  }
  std::sort(m.memory.begin(), m.memory.end(),
            [](const MemoryBlock& a, const MemoryBlock& b) { return a.address < b.address; });
  for (unsigned i = 0; i < 17; ++i)
    m.regs[i] = get_le<uint64_t>(regs + gt_reg_offset(kDwarfToRemote[i]));
  m.missed_memory = m.stopped_deep = false;
  m.no_cfi_pc = 0;
  m.out = &out;
  int rc = dwfl_getthread_frames(m.dwfl, m.modules.pid(), Impl::on_frame, &m);
  m.out = nullptr;
  // libdw takes a return address it could not read for "undefined", i.e. for
  // the outermost frame, and ends without an error: only the missed read
  // tells a cut snapshot from the real end of the stack.
  if (m.missed_memory || m.stopped_deep) {
    out.status = UnwoundStack::Truncated;
  } else if (rc == 0) {
    out.status = UnwoundStack::Complete;
  } else if (m.no_cfi_pc) {
    out.status = UnwoundStack::Failed;
    out.error = "no CFI for 0x" + hex::u64(m.no_cfi_pc);
  } else {
    out.status = UnwoundStack::Failed;
    out.error = dwfl_errmsg(-1);
  }
  return out;
}

} // namespace gdbtrace
