// Writer of gdb's "tfile" trace file format (gdb/tracefile-tfile.c), used by
// QTSave (tsave -r) and usable by anyone holding a frame stream.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "trace/trace_status.h"
#include "trace/tracepoint.h"

namespace gdbtrace {

struct TfileTracepoint {
  const Tracepoint* tp = nullptr;
  uint64_t hits = 0;
  uint64_t frame_bytes = 0; // "traceframe usage"
};

struct TfileContents {
  uint32_t regblock_size = 0;
  std::string tdesc_xml; // empty: no tdesc lines (gdb then uses the executable's arch)
  TraceStatus status;
  std::vector<TsvDefinition> tsvs;
  std::vector<TfileTracepoint> tracepoints;
  // Optional status fields, ";name:value" each, that gdb's parse_trace_status
  // skips (it ignores names it does not know) and other readers can find.
  std::string status_extra;
  // A streamed file (trace_stream.h) rewrites its status line and tracepoint
  // counts in place while and after the run: the status line is padded to
  // kTfileStatusWidth and the counts are written with 16 digits, so the header
  // keeps its size whatever the values.
  bool fixed_width = false;
  // When not 0: the header is padded to this many bytes with tdesc lines
  // holding an XML comment (gdb appends them to the target description,
  // where a comment after the root element is nothing), so a streamed file's
  // header can take the tracepoints defined during the run in place. Needs a
  // tdesc; a header that cannot be padded to exactly this size is returned
  // unpadded (the caller compares sizes).
  size_t pad_to = 0;
};

// Characters of a fixed-width status line before its '\n' (gdb's tfile reader
// refuses lines of 1000 characters or more).
constexpr size_t kTfileStatusWidth = 900;

// The "status ..." line of CONTENTS' header, with its '\n'.
std::string tfile_status_line(const TfileContents& contents);

// Everything before the frames: magic, "R", tdesc, status, tsv, tp lines, blank line.
std::string tfile_header(const TfileContents& contents);

// Writes the frame stream into a file piece by piece: calls its argument
// with each piece in order, stopping when it returns false.
using FrameStreamWriter =
    std::function<void(const std::function<bool(std::span<const uint8_t>)>& write)>;

// Writes header + the frame stream FRAMES writes + the end marker to PATH.
Result<void> write_tfile(const std::string& path, const TfileContents& contents,
                         const FrameStreamWriter& frames);

} // namespace gdbtrace
