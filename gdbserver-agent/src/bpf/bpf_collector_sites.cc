// Probes of the eBPF collector that share a site with another (emulation,
// definition order) and the threads a new probe must not catch mid-hit.
#include "bpf/bpf_collector_impl.h"

namespace gdbtrace::bpf_collector_internal {

// The recipe for the instruction at SITE, if this kernel lets the program carry
// it out. The bytes come from the file, not the tracee's memory, which may hold
// a debugger's int3 there.
std::optional<bpf::EmulationSite>
BpfCollector::emulation_site(const ProbeSite& site, uint64_t address, uint32_t slot) const {
  if (!emulation_available())
    return std::nullopt;
  uint8_t bytes[GDBTRACE_MAX_EMU];
  ssize_t n = pread(site.fd.get(), bytes, sizeof bytes, off_t(site.offset));
  gdbtrace_emu recipe{};
  if (n <= 0 || gt_emu_decode(bytes, uint32_t(n), &recipe) != 0 || !bpf::bpf_can_emulate(recipe))
    return std::nullopt;
  bpf::EmulationSite e;
  e.address = address;
  e.recipe = recipe;
  e.task_dr7_offset = *support_.task_dr7_offset;
  e.flag_map_fd = control_.get();
  e.flag_offset = uint32_t(slot * sizeof(ControlSlot) + offsetof(ControlSlot, emulate));
  return e;
}

// The kernel runs the programs of one address newest first (see
// keep_definition_order), so the one attached earliest runs last: only that one
// may move ip on, after every other has collected the registers as they were
// before the instruction. Flags go off before the new one goes on, so two
// programs of one address never both emulate.
void BpfCollector::set_emulating_probes() {
  std::map<std::pair<Pid, uint64_t>, const Probe*> last;
  for (const auto& p : probes_) {
    if (!p.attached_at)
      continue;
    const Probe*& l = last[{p.pid, p.address}];
    if (!l || p.attached_at < l->attached_at)
      l = &p;
  }
  auto chosen = [&](const Probe& p) {
    return p.emulates && p.attached_at && last[{p.pid, p.address}] == &p;
  };
  for (const auto& p : probes_)
    if (!chosen(p))
      __atomic_store_n(&control(p.slot).emulate, 0, __ATOMIC_RELEASE);
  for (const auto& p : probes_)
    if (chosen(p))
      __atomic_store_n(&control(p.slot).emulate, 1, __ATOMIC_RELEASE);
}

// set_emulating_probes() for the probes of one site (after a removal there).
void BpfCollector::set_emulating_at(Pid pid, uint64_t address) {
  const Probe* first = nullptr;
  for (size_t i : index_.at_site(pid, address))
    if (probes_[i].attached_at && (!first || probes_[i].attached_at < first->attached_at))
      first = &probes_[i];
  for (size_t i : index_.at_site(pid, address))
    if (&probes_[i] != first || !first->emulates)
      __atomic_store_n(&control(probes_[i].slot).emulate, 0, __ATOMIC_RELEASE);
  if (first && first->emulates)
    __atomic_store_n(&control(first->slot).emulate, 1, __ATOMIC_RELEASE);
}

// The kernel runs the consumers of one uprobe newest first; gdbserver collects
// the tracepoints at one address in definition order, and gdb relies on it
// (`tfind tracepoint N` searches forward from the current frame). So when a
// tracepoint joins an address, every older one there (lower number) is
// attached again after it, highest number first, and its first probe retired:
// the copy starts disabled, the original is disabled before the copy takes over
// its enabled state, so a hit in flight at that instant can be missed by it,
// never collected twice. A copy that cannot be made leaves the order as it was.
void BpfCollector::keep_definition_order(const Probe& added, TraceContext& ctx) {
  std::vector<size_t> older;
  for (size_t i = 0; i < probes_.size(); i++)
    if (&probes_[i] != &added && probes_[i].pid == added.pid &&
        probes_[i].address == added.address && probes_[i].tp < added.tp)
      older.push_back(i);
  std::sort(older.begin(), older.end(),
            [&](size_t a, size_t b) { return probes_[a].tp > probes_[b].tp; });
  std::vector<std::pair<size_t, Probe>> copies;
  for (size_t i : older) {
    const Probe& o = probes_[i];
    auto def = ctx.definition(o.tp, o.address);
    if (!def)
      break;
    auto copy = load_and_attach(o.pid, *def, ctx, false, o.slot);
    if (!copy)
      break;
    copies.emplace_back(i, std::move(*copy));
  }
  if (copies.empty())
    return;
  // The originals' records name their slots, which go away: hand them over
  // now, and their dropped hits, before they are retired.
  if (!draining_)
    drain();
  account_drops();
  std::vector<UniqueFd> retired;
  std::vector<size_t> gone;
  for (auto& [i, copy] : copies) {
    Probe& o = probes_[i];
    ControlSlot& from = control(o.slot);
    ControlSlot& to = control(copy.slot);
    uint64_t enabled = __atomic_exchange_n(&from.enabled, 0, __ATOMIC_ACQ_REL);
    __atomic_store_n(&to.hits, __atomic_load_n(&from.hits, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    __atomic_store_n(&to.enabled, enabled, __ATOMIC_RELEASE);
    // The pass-count hits moved with `hits`; the per-CPU counts stay with the slot.
    CollectorStats old = probe_stats(o);
    old.hits -= __atomic_load_n(&from.hits, __ATOMIC_RELAXED);
    replaced_stats_[{o.tp, o.address}] += old;
    copy.drops_reported = 0;
    retired.push_back(std::move(o.event));
    gone.push_back(i);
  }
  std::sort(gone.rbegin(), gone.rend());
  for (auto& [i, copy] : copies)
    probes_.push_back(std::move(copy));
  for (size_t i : gone)
    probes_.erase(probes_.begin() + long(i));
  reindex();
  bpf::close_concurrently(std::move(retired));
}

// Threads of PID stopped with their pc at ADDRESS (from /proc/PID/task/TID/syscall,
// "-1 sp pc" for a stopped thread outside a system call) go into the skip map.
uint64_t BpfCollector::mark_threads_at(Pid pid, uint64_t address, uint32_t slot) {
  uint64_t marked = 0;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d)
    return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.')
      continue;
    std::ifstream f(dir + "/" + e->d_name + "/syscall");
    std::string nr, sp, pc;
    if (!(f >> nr >> sp >> pc) || nr != "-1")
      continue;
    if (std::stoull(pc, nullptr, 16) != address)
      continue;
    uint64_t key = bpf::skip_key(uint32_t(atoi(e->d_name)), slot), value = address;
    if (bpf_map_update_elem(skips_.get(), &key, &value, BPF_ANY) == 0)
      marked++;
  }
  closedir(d);
  return marked;
}

// The skip marks of FROM_SLOT, copied to TO_SLOT; returns how many.
uint64_t BpfCollector::copy_skips(uint32_t from_slot, uint32_t to_slot) {
  std::vector<uint64_t> keys;
  uint64_t key = 0, prev = 0;
  bool first = true;
  while (bpf_map_get_next_key(skips_.get(), first ? nullptr : &prev, &key) == 0) {
    first = false;
    prev = key;
    if (uint32_t(key) == from_slot)
      keys.push_back(key);
  }
  uint64_t copied = 0;
  for (uint64_t k : keys) {
    uint64_t value = 0;
    if (bpf_map_lookup_elem(skips_.get(), &k, &value) != 0)
      continue;
    uint64_t to = bpf::skip_key(uint32_t(k >> 32), to_slot);
    if (bpf_map_update_elem(skips_.get(), &to, &value, BPF_ANY) == 0)
      copied++;
  }
  return copied;
}

} // namespace gdbtrace::bpf_collector_internal
