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
// Frames are staged and written in large writes, every write on the stream's
// own writer thread: the drain hands a stage over and goes on into another
// (kStages of them, up to kMaxStages while the disk stalls), so it never
// waits for the disk unless every stage is still being written. The drain
// thread waiting for a write (or writing the partial block through the page
// cache, which a later direct write of that block then waits to see written
// back) held it off the kernel rings for 0.16-0.21 s at a time, long enough
// for 4 busy threads to overflow them.
// Where the file system takes them, with O_DIRECT, straight from the stage
// to the disk: the copy into the page cache and its pages' allocation cost
// more of the stub's CPU than all the rest of a streamed frame's drain
// (1.4-1.8 ns a byte, ~0.25 us a 170-byte `collect $regs` frame, against
// ~0.02 us direct, on the VM of docs/benchmarks.md). Direct writes cover
// whole blocks from a block-aligned offset, so the header is padded to a
// block multiple; a flush writes the last partial block directly too, padded
// with zeros (which gdb reads as its end marker), and the next write covers
// that block again with the frames after it. Elsewhere (no target
// description to pad the header with, a file system without O_DIRECT)
// every write goes through the page cache.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

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
  // Writes the header of CONTENTS (the tracepoints defined since begin) over
  // the file's, before the frames staged after this call: an error (ENOSPC)
  // and nothing written when it does not fit. Before any frame of a
  // tracepoint the header did not define, so a reader never meets one.
  Result<void> rewrite_header(TfileContents contents);
  // Whole tfile frames, in order: staged, and handed to the writer when
  // enough are. Ignored after an error.
  void add(std::span<const uint8_t> frames);
  // Hands what is staged to the writer (unless every stage is being written:
  // the next hand-over takes it), whose status line after it says STATUS
  // (its frame count replaced by the frames in the file). The first error
  // stops the stream: returned once (by the first call after the writer
  // met it), then kept in error().
  Result<void> flush(TraceStatus status, const std::string& status_extra);
  // Waits until the writer has written everything handed to it.
  void settle();
  // Everything staged, the end marker, and the header of CONTENTS in place
  // of the first (only its status line when it does not fit: more
  // tracepoints defined during the run than its room takes). Closes the file.
  Result<void> finish(TfileContents contents);

  const std::string& path() const { return path_; }
  bool open() const { return fd_ >= 0; }
  // Whether frames go to the disk directly (O_DIRECT) rather than through
  // the page cache.
  bool direct() const { return direct_; }
  std::string error() const;
  uint64_t frames() const;     // frames wholly in the file
  uint64_t file_bytes() const; // the file's size so far
  // The longest the drain waited for the disk, in µs: for a stage to come
  // back from the writer. While it waits the kernel rings take the hits, and
  // a wait longer than they hold is lost frames.
  uint64_t longest_disk_wait_us() const;
  // The longest one write of frames took, in µs: how long the disk stalled.
  uint64_t longest_write_us() const;

private:
  // Stages: the drain fills one while the writer writes the others. Four
  // are kept; more are mapped while the disk stalls (the development VM's
  // disk stops for up to 0.7-0.8 s a few times a minute under a steady 320
  // MB/s of direct writes: docs/streaming.md), up to kMaxStages, and given
  // back to the kernel when the writer has caught up.
  static constexpr size_t kStages = 4;
  static constexpr size_t kMaxStages = 10;
  // What a write puts in the file: the frames that end at or before
  // whole_end (the end of the last of them).
  struct Counted {
    uint64_t frames = 0, whole_end = 0;
  };
  // One write for the writer's thread: a header, then LEN bytes of a stage
  // at AT, then the status line.
  struct Job {
    std::string header; // written at offset 0 first when not empty
    int stage = -1;     // of stages_, or none
    uint64_t at = 0;
    size_t len = 0;
    Counted counted;
  };

  uint8_t* stage(int n) { return static_cast<uint8_t*>(stages_[size_t(n)].get()); }
  // FLUSH: everything staged (direct: to the end of its last block, padded
  // with zeros); else the whole blocks staged. MAY_WAIT: for a free stage to
  // stage the rest in (else a flush with none free writes nothing now).
  // False once the stream has failed.
  bool hand_over(bool flush, bool may_wait);
  int take_free_stage(bool may_wait);
  bool map_stage(size_t n);
  void submit(Job job);
  void writer_loop();
  void run_job(Job& job);
  void write_status_line();
  // Marks the block boundaries FRAMES (about to be staged) cross or end on.
  void note_frames(std::span<const uint8_t> frames);
  // What the file holds once the staged bytes before AT (a block boundary) are in it.
  Counted counted_at(uint64_t at);
  bool failed() const;
  // After a failed write: the file is cut back to its last whole frame.
  void cut_back(int err);
  bool write_header_part(const std::string& text, uint64_t at);
  void fail(const std::string& what, int err);
  void start_writer();
  void stop_writer();
  void close_file();

  std::string path_;
  int fd_ = -1;
  int dfd_ = -1; // the same file opened O_DIRECT, while direct writes work
  std::atomic<bool> direct_ = false;
  std::array<Mapping, kMaxStages> stages_; // mapped as needed; never moved
  size_t mapped_ = 0;                      // stages_[0, mapped_) are mapped
  size_t header_size_ = 0;                 // of the fixed-width header

  // The drain's side. The bytes of the file from stage_at_ (a kBlock
  // multiple when direct) not yet handed over whole, in stage current_.
  int current_ = -1;
  size_t stage_len_ = 0;
  uint64_t stage_at_ = 0;
  uint64_t handed_end_ = 0; // the end of the bytes handed over so far
  // Frames are counted as they reach the file. Each block boundary the
  // staged frames cross or end on has a mark: the frames that end at or
  // before it, and where the last of them ends. Taken when the frames are
  // staged (their bytes are in the cache then: walking the frame headers of a
  // stage that was written later was 13 % of the stub's CPU per frame), looked
  // up when a write ends on the boundary.
  struct Mark {
    uint64_t at; // the boundary
    Counted counted;
  };
  std::deque<Mark> marks_;
  Counted last_counted_;       // of the last hand-over
  uint64_t staged_frames_ = 0; // frames added, in the file or staged
  std::string reported_error_; // error_ as flush() last returned it

  // Shared with the writer's thread, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> jobs_;
  std::vector<int> free_; // stages neither staged in nor written
  bool busy_ = false;     // the writer is running a job
  bool stopping_ = false;
  TraceStatus status_; // the status line's, but for its frame count
  std::string status_extra_;
  std::string error_;
  uint64_t frames_ = 0;
  uint64_t count_at_ = 0; // the end of the last frame in the file
  uint64_t written_ = 0;  // the file's size
  uint64_t longest_wait_us_ = 0;
  uint64_t longest_write_us_ = 0;

  // The writer's own.
  std::thread writer_;
  size_t status_offset_ = 0; // of the header's status line
};

} // namespace gdbtrace
