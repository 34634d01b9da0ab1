// A run's frames written to a tfile while the run goes on (`monitor gdbtrace
// stream FILE`, docs/streaming.md): the trace then outgrows the trace buffer,
// which keeps only the newest frames for tfind.
//
// The file is the stub's own tfile (tfile_writer.h) with a fixed-width header
// (TfileContents::fixed_width): the header goes first, frames are appended as
// the engine drains them, and the status line is rewritten in place after
// every write, so a file whose writer was killed still says how many frames
// it holds (the frames wholly in the file: one cut by the kill follows them);
// finish() writes the end marker and the final header. A failed write (disk
// full) is cut back to the end of the last whole frame before it, so a file
// that streaming stopped early never holds a torn frame.
//
// Frames are staged and written in large writes. Where the file system takes
// them, with O_DIRECT, straight from the stage to the disk: the copy into the
// page cache and its pages' allocation cost more of the stub's CPU than all
// the rest of a streamed frame's drain (1.4-1.8 ns a byte, ~0.25 us a
// 170-byte `collect $regs` frame, against ~0.02 us direct, on the VM of
// docs/benchmarks.md). A direct write runs on a thread of its own while the
// drain stages the next frames in a second stage (it waits for the disk, and
// the kernel rings fill while the drain waits). Direct writes cover whole
// blocks from a block-aligned
// offset, so the header is padded to a block multiple and the stage keeps the
// last partial block; a flush writes that tail through the page cache too (the
// next direct write covers it again), so every flush leaves every frame
// drained so far in the file. Elsewhere (no target description to pad the header with, a file
// system without O_DIRECT) every write goes through the page cache.
#pragma once

#include <cstdint>
#include <deque>
#include <future>
#include <span>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"
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
  // The unit of direct writes: their offsets, lengths and memory are
  // multiples of it (the page size and every disk's logical block divide it).
  static constexpr size_t kBlock = 4096;

  explicit TraceStream(std::string path) : path_(std::move(path)) {}
  ~TraceStream();
  TraceStream(const TraceStream&) = delete;
  TraceStream& operator=(const TraceStream&) = delete;

  // Whether PATH can be opened for writing (created empty if missing; an
  // existing file is left as it is).
  static Result<void> check_writable(const std::string& path);
  // Creates (or truncates) the file and writes the header of CONTENTS (made
  // fixed width here), with kHeaderRoom bytes of room for tracepoints defined
  // during the run when it has a target description (see pad_to), and padded
  // to a multiple of kBlock then, so frames can be written directly.
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
  // replaced by the frames in the file). The first error stops
  // the stream: returned once, then kept in error().
  Result<void> flush(TraceStatus status, const std::string& status_extra);
  // Everything staged, the end marker, and the header of CONTENTS in place
  // of the first (only its status line when it does not fit: more
  // tracepoints defined during the run than its room takes). Closes the file.
  Result<void> finish(TfileContents contents);

  const std::string& path() const { return path_; }
  bool open() const { return fd_ >= 0; }
  // Whether frames go to the disk directly (O_DIRECT) rather than through
  // the page cache.
  bool direct() const { return dfd_ >= 0; }
  const std::string& error() const { return error_; }
  uint64_t frames() const { return frames_; }      // frames wholly in the file
  uint64_t file_bytes() const { return written_; } // the file's size so far
  // The longest the drain waited for the disk, in µs: for a direct write in
  // flight to end, or in a flush (its own writes): while it waits, the kernel
  // rings take the hits, and a wait longer than they hold is lost frames.
  uint64_t longest_disk_wait_us() const { return longest_wait_us_; }

private:
  // Blocks: the staged bytes up to the last block boundary. Flush and All:
  // and the rest, through the page cache (direct: kept staged for Flush).
  // False on an error.
  enum class Write { Blocks, Flush, All };
  bool write_stage(Write how);
  bool start_direct_write();
  bool end_direct_write();
  // Marks the block boundaries FRAMES (about to be staged) cross or end on.
  void note_frames(std::span<const uint8_t> frames);
  // The file now holds every staged byte before AT (a block boundary): the
  // frames ending there or before it are in the file.
  void reached(uint64_t at);
  void drop_written(size_t len);
  bool cut_back(int err);
  bool write_at_end(std::span<const uint8_t> bytes);
  bool write_header_part(const std::string& text, uint64_t at);
  void fail(const std::string& what, int err);
  void close_file();

  std::string path_;
  int fd_ = -1;
  int dfd_ = -1; // the same file opened O_DIRECT, while direct writes work
  std::string error_;
  // The file's bytes from stage_at_ (a kBlock multiple when direct) not yet
  // all written: the last partial block of a direct stream stays (and goes
  // to the disk with the frames after it).
  Mapping stage_;
  // Direct: the other stage, which a write in flight (writing_, on its own
  // thread) takes the bytes [writing_at_, writing_end_) of the file from.
  Mapping spare_;
  std::future<int> writing_; // its errno, 0 when it wrote everything
  uint64_t writing_at_ = 0, writing_end_ = 0;
  uint64_t longest_wait_us_ = 0;
  size_t stage_len_ = 0;
  uint64_t stage_at_ = 0;
  // Frames are counted as they reach the file. Each block boundary the
  // staged frames cross or end on has a mark: the frames that end at or
  // before it, and where the last of them ends. Taken when the frames are
  // staged (their bytes are in the cache then: walking the frame headers of a
  // stage that was written later was 13 % of the stub's CPU per frame), looked
  // up when a write ends on the boundary.
  struct Mark {
    uint64_t at;        // the boundary
    uint64_t frames;    // frames that end at or before it
    uint64_t whole_end; // where the last of them ends
  };
  std::deque<Mark> marks_;
  uint64_t staged_frames_ = 0; // frames added, in the file or staged
  uint64_t count_at_ = 0;      // the end of the last frame in the file
  uint64_t frames_ = 0;
  uint64_t written_ = 0;       // file size: the stage's bytes written up to here
  size_t header_size_ = 0;     // of the fixed-width header
  size_t status_offset_ = 0;   // of its status line
  std::string reported_error_; // error_ as flush() last returned it
};

} // namespace gdbtrace
