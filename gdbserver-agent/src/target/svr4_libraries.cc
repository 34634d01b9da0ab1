#include "target/svr4_libraries.h"

#include <climits>
#include <cstring>
#include <elf.h>
#include <link.h>

namespace gdbtrace {
namespace {

// Offsets in the 64-bit glibc structures (struct r_debug / struct link_map).
constexpr uint64_t kRVersion = 0, kRMap = 8, kRNext = 40;
constexpr uint64_t kLAddr = 0, kLName = 8, kLLd = 16, kLNext = 24, kLPrev = 32;
constexpr int kMaxEntries = 100000; // a corrupted list must not loop forever

bool read_exact(const MemoryReader& read, uint64_t addr, void* out, size_t n) {
  auto r = read(addr, std::span<uint8_t>(static_cast<uint8_t*>(out), n));
  return r && *r == n;
}

bool read_u64(const MemoryReader& read, uint64_t addr, uint64_t& v) {
  return read_exact(read, addr, &v, 8);
}

std::string read_string(const MemoryReader& read, uint64_t addr) {
  std::string s;
  char chunk[256];
  while (s.size() < PATH_MAX) {
    auto r =
        read(addr + s.size(), std::span<uint8_t>(reinterpret_cast<uint8_t*>(chunk), sizeof chunk));
    if (!r || *r == 0)
      break;
    size_t len = strnlen(chunk, *r);
    s.append(chunk, len);
    if (len < *r)
      break;
  }
  return s;
}

uint64_t auxv_value(const std::string& auxv, uint64_t type) {
  for (size_t off = 0; off + sizeof(Elf64_auxv_t) <= auxv.size(); off += sizeof(Elf64_auxv_t)) {
    Elf64_auxv_t e;
    std::memcpy(&e, auxv.data() + off, sizeof e);
    if (e.a_type == type)
      return e.a_un.a_val;
    if (e.a_type == AT_NULL)
      break;
  }
  return 0;
}

// Address of the DT_DEBUG slot's value, i.e. of the r_debug pointer.
Result<uint64_t> find_r_debug(const std::string& auxv, const MemoryReader& read) {
  uint64_t phdr = auxv_value(auxv, AT_PHDR), phnum = auxv_value(auxv, AT_PHNUM);
  if (phdr == 0 || phnum == 0 || phnum > 4096)
    return make_error(EIO, "auxv has no AT_PHDR/AT_PHNUM");
  std::vector<Elf64_Phdr> ph(phnum);
  if (!read_exact(read, phdr, ph.data(), phnum * sizeof(Elf64_Phdr)))
    return make_error(EIO, "cannot read the program headers of the executable");
  uint64_t bias = 0;
  for (const auto& p : ph)
    if (p.p_type == PT_PHDR)
      bias = phdr - p.p_vaddr;
  for (const auto& p : ph) {
    if (p.p_type != PT_DYNAMIC)
      continue;
    uint64_t dyn = p.p_vaddr + bias;
    for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= p.p_memsz; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      if (!read_exact(read, dyn + off, &d, sizeof d))
        return make_error(EIO, "cannot read the dynamic section");
      if (d.d_tag == DT_NULL)
        break;
      if (d.d_tag == DT_DEBUG)
        return static_cast<uint64_t>(d.d_un.d_ptr);
    }
  }
  return make_error(ENOENT, "the executable has no DT_DEBUG entry (statically linked?)");
}

} // namespace

Result<LinkMapSnapshot> read_link_map(const std::string& auxv, const MemoryReader& read) {
  auto first = find_r_debug(auxv, read);
  if (!first)
    return first.error();
  LinkMapSnapshot snap;
  int budget = kMaxEntries;
  for (uint64_t r_debug = *first; r_debug != 0 && budget > 0;) {
    int32_t version = 0;
    uint64_t lm = 0;
    if (!read_exact(read, r_debug + kRVersion, &version, 4) || version < 1 ||
        !read_u64(read, r_debug + kRMap, lm))
      break;
    uint64_t prev = 0;
    // The first entry of the default namespace is the executable itself.
    if (r_debug == *first && lm != 0) {
      snap.main_lm = lm;
      prev = lm;
      if (!read_u64(read, lm + kLNext, lm))
        break;
    }
    while (lm != 0 && budget-- > 0) {
      uint64_t l_addr, l_name, l_ld, l_next, l_prev;
      if (!read_u64(read, lm + kLAddr, l_addr) || !read_u64(read, lm + kLName, l_name) ||
          !read_u64(read, lm + kLLd, l_ld) || !read_u64(read, lm + kLNext, l_next) ||
          !read_u64(read, lm + kLPrev, l_prev) || l_prev != prev)
        break; // unreadable or corrupted list: keep what we have, as gdbserver does
      std::string name = read_string(read, l_name);
      if (!name.empty())
        snap.libraries.push_back({name, lm, l_addr, l_ld, r_debug});
      prev = lm;
      lm = l_next;
    }
    if (version < 2 || !read_u64(read, r_debug + kRNext, r_debug))
      break;
  }
  return snap;
}

} // namespace gdbtrace
