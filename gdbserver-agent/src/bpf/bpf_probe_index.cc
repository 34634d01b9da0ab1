// The eBPF collector's probe index (bpf_probe_index.h): every change touches
// the entries of one or two probes only.
#include "bpf/bpf_probe_index.h"

#include <algorithm>

namespace gdbtrace::bpf_collector_internal {

namespace {
constexpr size_t kNone = SIZE_MAX;
} // namespace

void ProbeIndex::add(const ProbeKeys& k) {
  keys_.push_back(k);
  pass_entry_.push_back(kNone);
  link(keys_.size() - 1);
}

void ProbeIndex::link(size_t pos) {
  const ProbeKeys& k = keys_[pos];
  if (k.slot >= by_slot_.size())
    by_slot_.resize(size_t(k.slot) + 1, kNoProbe);
  by_slot_[k.slot] = uint32_t(pos);
  by_location_[{k.tp, k.address}].push_back(pos);
  by_site_[{k.pid, k.address}].push_back(pos);
  writes_ += 3;
  if (k.pass_counted) {
    pass_entry_[pos] = pass_counted_.size();
    pass_counted_.push_back(pos);
    writes_ += 2;
  }
}

// In KEY's list of positions, FROM becomes TO (kNone: FROM leaves the list,
// and the list the map when it is empty). The lists are the probes of one
// location or site: a handful, not the whole run.
template <class Key>
void ProbeIndex::move_entry(std::map<Key, std::vector<size_t>>& m, const Key& key, size_t from,
                            size_t to) {
  auto it = m.find(key);
  if (it == m.end())
    return;
  auto& list = it->second;
  auto at = std::find(list.begin(), list.end(), from);
  if (at == list.end())
    return;
  writes_++;
  if (to != kNone) {
    *at = to;
    return;
  }
  *at = list.back();
  list.pop_back();
  if (list.empty())
    m.erase(it);
}

// POS's entries leave the index (its keys stay until remove() overwrites them).
void ProbeIndex::unlink(size_t pos) {
  const ProbeKeys& k = keys_[pos];
  by_slot_[k.slot] = kNoProbe;
  writes_++;
  move_entry(by_location_, Location{k.tp, k.address}, pos, kNone);
  move_entry(by_site_, Site{k.pid, k.address}, pos, kNone);
  if (size_t e = pass_entry_[pos]; e != kNone) {
    size_t moved = pass_counted_.back();
    pass_counted_[e] = moved;
    pass_entry_[moved] = e;
    pass_counted_.pop_back();
    pass_entry_[pos] = kNone;
    writes_ += 2;
  }
}

size_t ProbeIndex::remove(size_t pos) {
  size_t last = keys_.size() - 1;
  unlink(pos);
  if (pos != last) {
    const ProbeKeys& k = keys_[last];
    by_slot_[k.slot] = uint32_t(pos);
    writes_++;
    move_entry(by_location_, Location{k.tp, k.address}, last, pos);
    move_entry(by_site_, Site{k.pid, k.address}, last, pos);
    if (size_t e = pass_entry_[last]; e != kNone) {
      pass_counted_[e] = pos;
      writes_++;
    }
    pass_entry_[pos] = pass_entry_[last];
    keys_[pos] = k;
  }
  keys_.pop_back();
  pass_entry_.pop_back();
  return last;
}

void ProbeIndex::clear() {
  writes_ += keys_.size();
  keys_.clear();
  by_slot_.clear();
  by_location_.clear();
  by_site_.clear();
  pass_counted_.clear();
  pass_entry_.clear();
}

std::span<const size_t> ProbeIndex::at_location(uint32_t tp, uint64_t address) const {
  auto it = by_location_.find({tp, address});
  return it == by_location_.end() ? std::span<const size_t>() : std::span<const size_t>(it->second);
}

std::span<const size_t> ProbeIndex::at_site(int pid, uint64_t address) const {
  auto it = by_site_.find({pid, address});
  return it == by_site_.end() ? std::span<const size_t>() : std::span<const size_t>(it->second);
}

} // namespace gdbtrace::bpf_collector_internal
