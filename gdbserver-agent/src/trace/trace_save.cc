// QTSave (tsave -r) and the qGdbtrace.save.file export: the tfile the stub
// writes itself from the trace buffer, with the registers every frame holds
// and one number per tracepoint location (gdb's tfile reader has neither
// per-frame register availability nor locations).
#include <algorithm>
#include <map>
#include <set>

#include "abi/amd64_regs.h"
#include "trace/frame.h"
#include "trace/trace_engine_impl.h"

namespace gdbtrace {

TfileContents TraceEngine::Impl::tfile_contents() const {
  TfileContents c;
  c.regblock_size = register_block_size();
  if (hooks.target_description)
    c.tdesc_xml = hooks.target_description(register_layout(), {});
  c.status = status();
  c.tsvs = tsv_definitions();
  for (const auto& e : tracepoints) {
    TfileTracepoint t;
    t.tp = &e->tp;
    // Each location its own counts, as in qTP (gdb sums them per number).
    auto r = report_for(*e);
    t.hits = r.hits;
    t.frame_bytes = r.bytes;
    c.tracepoints.push_back(t);
  }
  return c;
}

// Registers that every frame with an 'R' block really holds (a kernel
// collector's frames lack x87/SSE/AVX: their bytes there are zeros).
std::vector<bool> TraceEngine::Impl::registers_in_every_frame() const {
  uint32_t n = num_regs();
  std::vector<bool> present(n, true);
  for (long f = 0; f < long(buffer.frame_count()); ++f) {
    const std::vector<bool>* held = buffer.frame_registers_held(f);
    if (held && buffer.frame_has_registers(f))
      for (uint32_t r = 0; r < n; ++r)
        if (r >= held->size() || !(*held)[r])
          present[r] = false;
  }
  return present;
}

// FRAME with each 'R' block cut down to the PRESENT registers, in g-packet
// order (the layout of target_description(PRESENT)), and NUMBER as its
// tracepoint number.
static std::span<const uint8_t> rewrite_frame(std::span<const uint8_t> frame,
                                              const RegisterLayout& layout, uint32_t regblock_size,
                                              const std::vector<bool>& present, uint16_t number,
                                              FrameBuilder& out) {
  FrameView view(frame, regblock_size);
  out = FrameBuilder(number);
  view.for_each([&](const FrameBlock& b) {
    if (b.type == GT_TFRAME_REGS) {
      std::vector<uint8_t> kept;
      uint32_t offset = 0;
      for (uint32_t r = 0; r < present.size() && offset < b.length; ++r) {
        uint32_t size = layout.size(r);
        if (present[r])
          kept.insert(kept.end(), b.data + offset, b.data + offset + size);
        offset += size;
      }
      out.add_registers(kept);
    } else if (b.type == GT_TFRAME_MEM) {
      out.add_memory(b.address, {b.data, b.length});
    } else if (b.type == GT_TFRAME_TSV) {
      out.add_tsv(b.tsv, b.value);
    }
    return true;
  });
  return out.finish();
}

// A frame names only its tracepoint number, and gdb's tfile reader maps a
// number to the first tracepoint it made from the file for it
// (merge_uploaded_tracepoints makes one per `tp T` line whose address its
// symbols do not resolve to, from the line's "at" source, e.g. `malloc`
// resolved again in the new session); a frame without an 'R' block gets that
// tracepoint's single location as its pc. So the frames of every location
// but the first of a number with several would be shown at the wrong place.
// In the file, each further location gets a number of its own (above every
// number in use) and no "at" source: gdb then makes one tracepoint per
// location at its address ("*ADDR"), with that location's own counts, and
// each frame maps to the location that collected it. Returns the file number
// of each (number, address) that changes; empty when none does or when the
// numbers would not fit a frame's u16.
std::map<Location, uint16_t> TraceEngine::Impl::file_numbers() const {
  std::map<uint32_t, int> locations;
  uint32_t next = 0;
  for (const auto& e : tracepoints) {
    ++locations[e->tp.number];
    next = std::max(next, e->tp.number + 1);
  }
  std::map<Location, uint16_t> numbers;
  std::set<uint32_t> seen;
  for (const auto& e : tracepoints) {
    if (locations[e->tp.number] < 2 || seen.insert(e->tp.number).second)
      continue;
    if (next > 0xffff)
      return {};
    numbers[{e->tp.number, e->tp.address}] = uint16_t(next++);
  }
  return numbers;
}

// QTSave (tsave -r). When some frames lack registers, the file holds only the
// registers every frame has, and its target description numbers the others
// after them: gdb's tfile reader then shows those as <unavailable> (it has no
// per-frame availability, only the 'R' block size) instead of reading zeros.
// A number with several locations is written as one number per location
// (file_numbers). The frames are written one at a time, as the buffer
// expands them.
Result<void> TraceEngine::save(const std::string& path) {
  Impl& m = *impl_;
  m.drain_all();
  TfileContents contents = m.tfile_contents();
  std::vector<bool> present = m.registers_in_every_frame();
  bool all = std::find(present.begin(), present.end(), false) == present.end();
  if (all || !m.hooks.target_description)
    present.assign(present.size(), true);
  else {
    contents.tdesc_xml = m.hooks.target_description(m.register_layout(), present);
    contents.regblock_size = 0;
    for (uint32_t r = 0; r < present.size(); ++r)
      if (present[r])
        contents.regblock_size += m.register_layout().size(r);
  }
  std::map<Location, uint16_t> numbers = m.file_numbers();
  std::set<uint32_t> renumbered; // numbers with several locations
  for (const auto& [location, number] : numbers)
    renumbered.insert(location.first);
  std::vector<Tracepoint> copies;
  copies.reserve(contents.tracepoints.size());
  for (auto& t : contents.tracepoints) {
    if (!renumbered.count(t.tp->number))
      continue;
    Tracepoint& copy = copies.emplace_back(*t.tp);
    if (auto it = numbers.find({copy.number, copy.address}); it != numbers.end())
      copy.number = it->second;
    for (size_t i = copy.source.size(); i-- > 0;)
      if (i < copy.source_types.size() && copy.source_types[i] == "at") {
        copy.source.erase(copy.source.begin() + long(i));
        copy.source_types.erase(copy.source_types.begin() + long(i));
      }
    t.tp = &copy;
  }
  if (all && numbers.empty())
    return write_tfile(path, contents, [&](const TraceBuffer::Sink& sink) {
      m.buffer.read_stream(0, m.buffer.stream_size(), sink);
    });
  // A frame's location: where its pc is (the 'R' block's, or the location that
  // collected it, see append). A while-stepping frame's pc is past the
  // location: it stays with the number's first location.
  auto number_of = [&](long index, uint16_t tp) -> uint16_t {
    if (!renumbered.count(tp))
      return tp;
    auto it = numbers.find({tp, m.buffer.frame_pc(index)});
    return it != numbers.end() ? it->second : tp;
  };
  return write_tfile(path, contents, [&](const TraceBuffer::Sink& sink) {
    std::vector<uint8_t> scratch;
    FrameBuilder kept(0);
    for (long f = 0; f < long(m.buffer.frame_count()); ++f) {
      std::span<const uint8_t> frame = m.buffer.frame(f, scratch);
      uint16_t number = number_of(f, gt_tframe_tp(frame.data()));
      if (!sink(rewrite_frame(frame, m.register_layout(), m.register_block_size(), present, number,
                              kept)))
        return;
    }
  });
}

std::vector<bool> TraceEngine::registers_in_every_frame() const {
  return impl_->registers_in_every_frame();
}

} // namespace gdbtrace
