// A run's frames written to a tfile while the run goes on (`monitor gdbtrace
// stream FILE`, docs/streaming.md): the trace then outgrows the trace buffer,
// which keeps only the newest frames for tfind.
//
// The file is the stub's own tfile (tfile_writer.h) with a fixed-width header
// (TfileContents::fixed_width): the header goes first, frames are appended as
// the engine drains them, and the status line is rewritten in place after
// every write, so a file whose writer was killed still says how many frames
// it holds; finish() writes the end marker and the final header. Frames are
// staged and written in large writes; every write ends on a frame boundary,
// and a failed one (disk full) is cut back to the boundary before it, so the
// file never holds a torn frame.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "trace/tfile_writer.h"

namespace gdbtrace {

// A loss marker in a streamed file (docs/streaming.md): a frame of the
// tracepoint that lost frames, holding only this trace state variable, whose
// value is the frames that location lost since its previous marker. The
// file's header defines the variable under this name (gdb numbers its own
// variables from 1 up, so the number is free).
constexpr uint32_t kDropMarkerTsv = 0x7fffffff;
constexpr const char* kDropMarkerTsvName = "gdbtrace_dropped";

class TraceStream {
public:
  // Room a streamed file's header keeps for tracepoints defined during the
  // run: some 100 to 400 of them (a tracepoint takes a few lines: its
  // definition, actions, sources and counts).
  static constexpr size_t kHeaderRoom = 64 << 10;

  explicit TraceStream(std::string path) : path_(std::move(path)) {}
  ~TraceStream();
  TraceStream(const TraceStream&) = delete;
  TraceStream& operator=(const TraceStream&) = delete;

  // Whether PATH can be opened for writing (created empty if missing; an
  // existing file is left as it is).
  static Result<void> check_writable(const std::string& path);
  // Creates (or truncates) the file and writes the header of CONTENTS (made
  // fixed width here), with kHeaderRoom bytes of room for tracepoints defined
  // during the run when it has a target description (see pad_to).
  Result<void> begin(TfileContents contents);
  // Whether the header of CONTENTS fits the file's header (its room).
  bool header_fits(TfileContents contents) const;
  // Writes the header of CONTENTS (the tracepoints defined since begin, its
  // status with the frames in the file) over the file's: an error (ENOSPC)
  // and nothing written when it does not fit. Before any frame of a
  // tracepoint the header did not define, so a reader never meets one.
  Result<void> rewrite_header(TfileContents contents);
  // Whole tfile frames, in order: staged, and written when enough are.
  // Ignored after an error.
  void add(std::span<const uint8_t> frames);
  // Writes what is staged, then the status line of STATUS (its frame count
  // replaced by the frames in the file). The first error stops the stream:
  // returned once, then kept in error().
  Result<void> flush(TraceStatus status, const std::string& status_extra);
  // flush, the end marker, and the header of CONTENTS in place of the first
  // (only its status line when it does not fit: more tracepoints defined
  // during the run than its room takes). Closes the file.
  Result<void> finish(TfileContents contents);

  const std::string& path() const { return path_; }
  bool open() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  uint64_t frames() const { return frames_; }      // frames in the file
  uint64_t file_bytes() const { return written_; } // header and those frames

private:
  bool write_staged();
  bool write_at_end(std::span<const uint8_t> bytes);
  bool write_header_part(const std::string& text, uint64_t at);
  void fail(const std::string& what, int err);
  void close_file();

  std::string path_;
  int fd_ = -1;
  std::string error_;
  std::vector<uint8_t> staged_;
  uint64_t staged_frames_ = 0;
  uint64_t frames_ = 0;
  uint64_t written_ = 0;       // file size: always a frame boundary
  size_t header_size_ = 0;     // of the fixed-width header
  size_t status_offset_ = 0;   // of its status line
  std::string reported_error_; // error_ as flush() last returned it
};

} // namespace gdbtrace
