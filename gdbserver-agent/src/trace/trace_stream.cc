#include "trace/trace_stream.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "abi/tframe.h"

namespace gdbtrace {

namespace {
// Frames are written in writes of about this size: a drain at a ring's
// wake-up mark (a megabyte or more of frames) is a few writes, not a write
// per frame.
constexpr size_t kStageBytes = 1 << 20;

// Frames in BYTES (whole frames back to back).
uint64_t count_frames(std::span<const uint8_t> bytes) {
  uint64_t n = 0;
  for (size_t at = 0; at + GT_TFRAME_HEADER_SIZE <= bytes.size(); ++n)
    at += GT_TFRAME_HEADER_SIZE + gt_tframe_size(bytes.data() + at);
  return n;
}
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
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
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
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    return make_error(errno, "cannot create " + path_ + ": " + std::strerror(errno));
  error_.clear();
  reported_error_.clear();
  staged_.clear();
  staged_.reserve(kStageBytes);
  staged_frames_ = frames_ = written_ = 0;
  contents.fixed_width = true;
  contents.pad_to = tfile_header(contents).size() + kHeaderRoom;
  std::string header = tfile_header(contents);
  header_size_ = header.size();
  status_offset_ = header.find("\nstatus ") + 1;
  if (!write_at_end({reinterpret_cast<const uint8_t*>(header.data()), header.size()})) {
    close_file();
    return make_error(EIO, error_);
  }
  return ok();
}

// Appends BYTES (whole frames) at the end of the file; on a failure the file
// is cut back to its size before, a frame boundary.
bool TraceStream::write_at_end(std::span<const uint8_t> bytes) {
  if (int err = pwrite_all(fd_, bytes.data(), bytes.size(), written_, ENOSPC)) {
    if (::ftruncate(fd_, off_t(written_)) != 0) {
      // The torn tail stays: say so rather than claim a clean file.
      fail("cannot write (and cannot cut back a partly written frame in)", err);
      return false;
    }
    fail("cannot write", err);
    return false;
  }
  written_ += bytes.size();
  return true;
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

bool TraceStream::write_staged() {
  if (staged_.empty())
    return true;
  bool good = write_at_end(staged_);
  if (good)
    frames_ += staged_frames_;
  staged_.clear();
  staged_frames_ = 0;
  return good;
}

void TraceStream::add(std::span<const uint8_t> frames) {
  if (fd_ < 0 || !error_.empty() || frames.empty())
    return;
  if (staged_.size() + frames.size() > kStageBytes && !write_staged())
    return;
  if (frames.size() >= kStageBytes) { // a long run of frames stored as they are
    if (write_at_end(frames))
      frames_ += count_frames(frames);
    return;
  }
  staged_.insert(staged_.end(), frames.begin(), frames.end());
  staged_frames_ += count_frames(frames);
}

Result<void> TraceStream::flush(TraceStatus status, const std::string& status_extra) {
  if (fd_ >= 0 && error_.empty() && write_staged()) {
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
