// The engine's tracepoint locations in definition order, with indexes by
// number and by address: a hit (record_hit, pass counts), a QTDP packet and an
// install look their entry up in O(1) (hashed: with thousands of tracepoints
// hit in turn, every level of a tree is a cache miss on the drain's path) or
// O(log n) by address (ranges need the order), so a run of thousands of
// tracepoints costs each hit what a run of one does.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

namespace gdbtrace {

// Hash of a tracepoint location (number, address) for the hashed indexes.
struct LocationHash {
  size_t operator()(const std::pair<uint32_t, uint64_t>& l) const {
    return std::hash<uint64_t>()(l.second * 0x9e3779b97f4a7c15ull ^ l.first);
  }
};

template <class Entry> class TracepointTable {
public:
  using Entries = std::vector<std::unique_ptr<Entry>>;

  // Definition order (upload, reports, tstart's installs walk it).
  typename Entries::iterator begin() { return entries_.begin(); }
  typename Entries::iterator end() { return entries_.end(); }
  typename Entries::const_iterator begin() const { return entries_.begin(); }
  typename Entries::const_iterator end() const { return entries_.end(); }
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

  Entry* add(std::unique_ptr<Entry> entry) {
    Entry* e = entry.get();
    entries_.push_back(std::move(entry));
    by_location_[{e->tp.number, e->tp.address}] = e;
    by_number_[e->tp.number].push_back(e);
    by_address_[e->tp.address].push_back(e);
    return e;
  }

  void erase(Entry* e) {
    by_location_.erase({e->tp.number, e->tp.address});
    unlink(by_number_, e->tp.number, e);
    unlink(by_address_, e->tp.address, e);
    std::erase_if(entries_, [e](const auto& p) { return p.get() == e; });
  }

  void clear() {
    by_location_.clear();
    by_number_.clear();
    by_address_.clear();
    entries_.clear();
  }

  Entry* find(uint32_t number, uint64_t address) const {
    auto it = by_location_.find({number, address});
    return it == by_location_.end() ? nullptr : it->second;
  }

  // The number's first location in definition order (its pass count, step count).
  Entry* first_with_number(uint32_t number) const {
    auto it = by_number_.find(number);
    return it == by_number_.end() ? nullptr : it->second.front();
  }

  // Every location of NUMBER, definition order.
  const std::vector<Entry*>& with_number(uint32_t number) const {
    static const std::vector<Entry*> none;
    auto it = by_number_.find(number);
    return it == by_number_.end() ? none : it->second;
  }

  // Every location at ADDRESS (tracepoints of several numbers), definition order.
  const std::vector<Entry*>& at_address(uint64_t address) const {
    static const std::vector<Entry*> none;
    auto it = by_address_.find(address);
    return it == by_address_.end() ? none : it->second;
  }

  // Calls F(entry) for every location whose address lies in [LO, HI).
  template <class F> void for_each_in(uint64_t lo, uint64_t hi, F f) const {
    for (auto it = by_address_.lower_bound(lo); it != by_address_.end() && it->first < hi; ++it)
      for (Entry* e : it->second)
        f(*e);
  }

private:
  template <class Index, class Key> static void unlink(Index& index, Key key, Entry* e) {
    auto it = index.find(key);
    if (it == index.end())
      return;
    std::erase(it->second, e);
    if (it->second.empty())
      index.erase(it);
  }

  Entries entries_;
  std::unordered_map<std::pair<uint32_t, uint64_t>, Entry*, LocationHash> by_location_;
  std::unordered_map<uint32_t, std::vector<Entry*>> by_number_;
  std::map<uint64_t, std::vector<Entry*>> by_address_;
};

} // namespace gdbtrace
