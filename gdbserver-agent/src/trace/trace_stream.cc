#include "trace/trace_stream.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "abi/tframe.h"

namespace gdbtrace {

namespace {
// Frames are written once this many are staged: a drain at a ring's wake-up
// mark (megabytes of frames) is a few writes, not a write per frame. Direct
// writes are larger: each waits for the disk (the VM of docs/benchmarks.md:
// ~130 MB/s in 2 MB writes, 430-840 MB/s in 8-16 MB ones).
constexpr size_t kBufferedBytes = 1 << 20;
constexpr size_t kDirectBytes = 8 << 20;
// Room for the most a stage holds: kDirectBytes, the partial block kept
// after a write, and a block kept for a frame whose header was not read yet.
constexpr size_t kStageRoom = kDirectBytes + 2 * TraceStream::kBlock;

// Writes LEN bytes of DATA at AT, however many calls it takes. 0, or the
// errno of the failure (SHORT when the file took nothing, e.g. a full disk).
int pwrite_all(int fd, const void* data, size_t len, uint64_t at, int short_err) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pwrite(fd, static_cast<const char*>(data) + done, len - done, off_t(at + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 ? errno : short_err;
    done += size_t(n);
  }
  return 0;
}

} // namespace

TraceStream::~TraceStream() {
  close_file();
}

void TraceStream::close_file() {
  if (writing_.valid())
    writing_.wait();
  if (dfd_ >= 0)
    ::close(dfd_);
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = dfd_ = -1;
}

void TraceStream::fail(const std::string& what, int err) {
  if (error_.empty())
    error_ = what + " " + path_ + ": " + std::strerror(err);
}

Result<void> TraceStream::check_writable(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error(errno, "cannot create " + path + ": " + std::strerror(errno));
  ::close(fd);
  return ok();
}

Result<void> TraceStream::begin(TfileContents contents) {
  close_file();
  if (!stage_.get()) {
    void* p = mmap(nullptr, kStageRoom, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return make_error(errno, std::string("cannot map the stream's stage: ") + strerror(errno));
    stage_ = Mapping(p, kStageRoom);
  }
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    return make_error(errno, "cannot create " + path_ + ": " + std::strerror(errno));
  error_.clear();
  reported_error_.clear();
  contents.fixed_width = true;
  size_t padded = tfile_header(contents).size() + kHeaderRoom;
  contents.pad_to = (padded + kBlock - 1) & ~(kBlock - 1); // frames start on a block
  std::string header = tfile_header(contents);
  header_size_ = header.size();
  status_offset_ = header.find("\nstatus ") + 1;
  stage_len_ = 0;
  stage_at_ = count_at_ = written_ = 0;
  frames_ = staged_frames_ = 0;
  marks_.clear();
  if (!write_at_end({reinterpret_cast<const uint8_t*>(header.data()), header.size()})) {
    close_file();
    return make_error(EIO, error_);
  }
  stage_at_ = count_at_ = written_;
  // Without a target description the header cannot be padded: no direct writes.
  if (header_size_ % kBlock == 0)
    dfd_ = ::open(path_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (dfd_ >= 0 && !spare_.get()) {
    void* p = mmap(nullptr, kStageRoom, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED)
      spare_ = Mapping(p, kStageRoom);
  }
  if (!spare_.get() && dfd_ >= 0) { // no second stage: no direct writes
    ::close(dfd_);
    dfd_ = -1;
  }
  return ok();
}

// Appends BYTES (whole frames or the end marker) at the end of the file
// through the page cache; on a failure the file is cut back to its last whole frame.
bool TraceStream::write_at_end(std::span<const uint8_t> bytes) {
  if (int err = pwrite_all(fd_, bytes.data(), bytes.size(), written_, ENOSPC))
    return cut_back(err);
  written_ += bytes.size();
  return true;
}

// After a failed write: the file ends at its last whole frame again.
bool TraceStream::cut_back(int err) {
  if (::ftruncate(fd_, off_t(count_at_)) != 0) {
    // The torn tail stays: say so rather than claim a clean file.
    fail("cannot write (and cannot cut back a partly written frame in)", err);
    return false;
  }
  written_ = stage_at_ = count_at_;
  stage_len_ = 0;
  staged_frames_ = frames_;
  marks_.clear();
  fail("cannot write", err);
  return false;
}

bool TraceStream::write_header_part(const std::string& text, uint64_t at) {
  if (int err = pwrite_all(fd_, text.data(), text.size(), at, EIO)) {
    fail("cannot rewrite the header of", err);
    return false;
  }
  return true;
}

bool TraceStream::header_fits(TfileContents contents) const {
  contents.fixed_width = true;
  contents.pad_to = header_size_;
  return tfile_header(contents).size() == header_size_;
}

Result<void> TraceStream::rewrite_header(TfileContents contents) {
  if (fd_ < 0 || !error_.empty())
    return make_error(EIO, error_.empty() ? "the stream is not open" : error_);
  contents.fixed_width = true;
  contents.pad_to = header_size_;
  contents.status.frames = frames_; // the frames already in the file
  std::string header = tfile_header(contents);
  if (header.size() != header_size_)
    return make_error(ENOSPC, "the header of " + path_ + " has no room left for the tracepoints " +
                                  "defined during the run (" + std::to_string(kHeaderRoom) +
                                  " bytes kept for them)");
  if (!write_header_part(header, 0))
    return make_error(EIO, error_);
  status_offset_ = header.find("\nstatus ") + 1;
  return ok();
}

void TraceStream::note_frames(std::span<const uint8_t> frames) {
  uint64_t start = stage_at_ + stage_len_;
  for (size_t at = 0; at + GT_TFRAME_HEADER_SIZE <= frames.size();) {
    const size_t len = GT_TFRAME_HEADER_SIZE + gt_tframe_size(frames.data() + at);
    const uint64_t end = start + len;
    for (uint64_t b = (start & ~uint64_t(kBlock - 1)) + kBlock; b <= end; b += kBlock)
      marks_.push_back(b == end ? Mark{b, staged_frames_ + 1, end}
                                : Mark{b, staged_frames_, start});
    ++staged_frames_;
    start = end;
    at += len;
  }
}

void TraceStream::reached(uint64_t at) {
  for (; !marks_.empty() && marks_.front().at <= at; marks_.pop_front())
    if (marks_.front().at == at) {
      frames_ = marks_.front().frames;
      count_at_ = marks_.front().whole_end;
    }
}

// Takes the first LEN bytes, now written, off the stage.
void TraceStream::drop_written(size_t len) {
  auto* stage = static_cast<uint8_t*>(stage_.get());
  std::memmove(stage, stage + len, stage_len_ - len);
  stage_len_ -= len;
  stage_at_ += len;
}

// The staged bytes up to the last block boundary (direct: whole blocks, as
// the stage starts on one), then, for Flush and All, the rest through the
// page cache, so the file holds every frame drained. A direct stream keeps
// that rest staged (but for All): the next direct write covers it again.
bool TraceStream::write_stage(Write how) {
  if (direct() && how == Write::Blocks)
    return start_direct_write();
  if (!end_direct_write())
    return false;
  const auto* stage = static_cast<const uint8_t*>(stage_.get());
  const uint64_t end = stage_at_ + stage_len_;
  const uint64_t boundary = end & ~uint64_t(kBlock - 1);
  if (boundary > stage_at_) {
    const size_t len = size_t(boundary - stage_at_);
    int err = pwrite_all(direct() ? dfd_ : fd_, stage, len, stage_at_, ENOSPC);
    if (err == EINVAL && direct()) { // the file system refuses direct writes after all
      ::close(dfd_);
      dfd_ = -1;
      return write_stage(how);
    }
    if (err)
      return cut_back(err);
    written_ = std::max(written_, boundary);
    reached(boundary);
    drop_written(len);
  }
  if (how == Write::Blocks || stage_len_ == 0)
    return true;
  if (int err = pwrite_all(fd_, stage, stage_len_, stage_at_, ENOSPC))
    return cut_back(err);
  written_ = std::max(written_, end);
  frames_ = staged_frames_; // staged frames are whole: all of them are in the file now
  count_at_ = end;
  marks_.clear(); // none past END, and those before it were taken
  if (!direct() || how == Write::All)
    drop_written(stage_len_);
  return true;
}

// The stage's whole blocks go to the disk on a thread of their own while the
// drain goes on (a direct write waits for the disk: 10-60 ms for 8 MB on the
// VM of docs/benchmarks.md, longer when other work shares the disk, and the
// kernel rings fill meanwhile); the rest starts the other stage. One write at
// a time: the previous one ends first.
bool TraceStream::start_direct_write() {
  if (!end_direct_write())
    return false;
  const uint64_t boundary = (stage_at_ + stage_len_) & ~uint64_t(kBlock - 1);
  if (boundary <= stage_at_)
    return true;
  const size_t len = size_t(boundary - stage_at_);
  std::memcpy(spare_.get(), static_cast<const uint8_t*>(stage_.get()) + len, stage_len_ - len);
  std::swap(stage_, spare_);
  writing_at_ = stage_at_;
  writing_end_ = boundary;
  auto write = [fd = dfd_, data = spare_.get(), len, at = writing_at_] {
    return pwrite_all(fd, data, len, at, ENOSPC);
  };
  try {
    writing_ = std::async(std::launch::async, write);
  } catch (const std::system_error&) { // no thread to be had: written here
    std::promise<int> done;
    done.set_value(write());
    writing_ = done.get_future();
  }
  stage_len_ -= len;
  stage_at_ = boundary;
  return true;
}

// Waits for the direct write in flight, if any, and takes its frames as in the file.
bool TraceStream::end_direct_write() {
  if (!writing_.valid())
    return true;
  auto waited_from = std::chrono::steady_clock::now();
  int err = writing_.get();
  auto waited = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - waited_from);
  longest_wait_us_ = std::max(longest_wait_us_, uint64_t(waited.count()));
  if (err == EINVAL) { // the file system refuses direct writes after all: the page cache
    ::close(dfd_);
    dfd_ = -1;
    err = pwrite_all(fd_, spare_.get(), size_t(writing_end_ - writing_at_), writing_at_, ENOSPC);
  }
  if (err)
    return cut_back(err);
  written_ = std::max(written_, writing_end_);
  reached(writing_end_);
  return true;
}

void TraceStream::add(std::span<const uint8_t> frames) {
  if (fd_ < 0 || !error_.empty())
    return;
  note_frames(frames);
  while (!frames.empty()) {
    size_t mark = direct() ? kDirectBytes : kBufferedBytes;
    size_t n = std::min(frames.size(), kStageRoom - stage_len_);
    // The stage of this pass: a direct write hands the other one over.
    std::memcpy(static_cast<uint8_t*>(stage_.get()) + stage_len_, frames.data(), n);
    stage_len_ += n;
    frames = frames.subspan(n);
    if (stage_len_ >= mark && !write_stage(Write::Blocks))
      return;
  }
}

Result<void> TraceStream::flush(TraceStatus status, const std::string& status_extra) {
  // The drain's thread writes here itself (whole blocks directly, the rest
  // and the status line through the page cache, whose pages a later direct
  // write must wait to see written back): counted as waiting for the disk.
  auto from = std::chrono::steady_clock::now();
  struct Timed {
    std::chrono::steady_clock::time_point from;
    uint64_t& longest;
    ~Timed() {
      auto us = std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now() - from);
      longest = std::max(longest, uint64_t(us.count()));
    }
  } timed{from, longest_wait_us_};
  if (fd_ >= 0 && error_.empty() && write_stage(Write::Flush)) {
    // After the frames: the count in the file never exceeds the frames it holds.
    TfileContents c;
    status.frames = frames_;
    c.status = std::move(status);
    c.status_extra = status_extra;
    c.fixed_width = true;
    write_header_part(tfile_status_line(c), status_offset_);
  }
  if (error_.empty() || error_ == reported_error_)
    return ok();
  reported_error_ = error_;
  return make_error(EIO, error_);
}

Result<void> TraceStream::finish(TfileContents contents) {
  contents.fixed_width = true;
  if (fd_ >= 0 && error_.empty())
    write_stage(Write::All);
  Result<void> flushed = flush(contents.status, contents.status_extra);
  if (fd_ < 0)
    return flushed;
  // Also after a failed write (cut back to a frame boundary): the marker and
  // the final counts may still fit, and make the file whole.
  static const uint8_t end_marker[4] = {0, 0, 0, 0};
  if (write_at_end(end_marker)) {
    contents.status.frames = frames_;
    contents.pad_to = header_size_;
    std::string header = tfile_header(contents);
    if (header.size() == header_size_)
      write_header_part(header, 0);
    else
      write_header_part(tfile_status_line(contents), status_offset_);
  }
  close_file();
  if (!flushed)
    return flushed;
  if (!error_.empty() && error_ != reported_error_) {
    reported_error_ = error_;
    return make_error(EIO, error_);
  }
  return ok();
}

} // namespace gdbtrace
