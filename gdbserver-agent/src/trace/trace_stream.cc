#include "trace/trace_stream.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include <emmintrin.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "abi/tframe.h"
#include "common/populate.h"

namespace gdbtrace {

namespace {
// Stages are handed to the writer once this many bytes are staged: a drain
// at a ring's wake-up mark (megabytes of frames) is a few writes, not a write
// per frame. Direct writes are larger: each waits for the disk (the VM of
// docs/benchmarks.md: ~130 MB/s in 2 MB writes, 430-840 MB/s in 8-16 MB ones).
constexpr size_t kBufferedBytes = 1 << 20;
constexpr size_t kDirectBytes = 8 << 20;
// Room for the most a stage holds: kDirectBytes, the partial block kept
// after a write, and a block kept for a frame whose header was not read yet.
constexpr size_t kStageRoom = kDirectBytes + 2 * TraceStream::kBlock;

// Copies N bytes into a stage with non-temporal stores where it can: a stage
// is read by the disk (O_DIRECT) or the kernel's copy into the page cache,
// never again by the drain, and filling it through the caches read every line
// in first and pushed out lines the drain still needed (the copy was ~8 % of
// a streamed frame's drain). hand_over fences them before the writer sees them.
void copy_to_stage(uint8_t* dst, const uint8_t* src, size_t n) {
  const size_t head = (16 - (uintptr_t(dst) & 15)) & 15;
  if (n < 256) {
    std::memcpy(dst, src, n);
    return;
  }
  std::memcpy(dst, src, head);
  dst += head, src += head, n -= head;
  for (; n >= 64; n -= 64, dst += 64, src += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
  }
  std::memcpy(dst, src, n);
}

uint64_t round_up(uint64_t at) {
  return (at + TraceStream::kBlock - 1) & ~uint64_t(TraceStream::kBlock - 1);
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
  stop_writer();
  if (dfd_ >= 0)
    ::close(dfd_);
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = dfd_ = -1;
  direct_ = false;
}

std::string TraceStream::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

bool TraceStream::failed() const {
  std::lock_guard lock(mutex_);
  return !error_.empty();
}

uint64_t TraceStream::frames() const {
  std::lock_guard lock(mutex_);
  return frames_;
}

uint64_t TraceStream::file_bytes() const {
  std::lock_guard lock(mutex_);
  return written_;
}

uint64_t TraceStream::longest_disk_wait_us() const {
  std::lock_guard lock(mutex_);
  return longest_wait_us_;
}

uint64_t TraceStream::longest_write_us() const {
  std::lock_guard lock(mutex_);
  return longest_write_us_;
}

void TraceStream::fail(const std::string& what, int err) {
  std::lock_guard lock(mutex_);
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
  for (size_t n = 0; n < kStages; ++n)
    if (!map_stage(n))
      return make_error(errno, std::string("cannot map the stream's stages: ") + strerror(errno));
  mapped_ = std::max(mapped_, kStages);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    return make_error(errno, "cannot create " + path_ + ": " + std::strerror(errno));
  contents.fixed_width = true;
  size_t padded = tfile_header(contents).size() + kHeaderRoom;
  contents.pad_to = (padded + kBlock - 1) & ~(kBlock - 1); // frames start on a block
  std::string header = tfile_header(contents);
  header_size_ = header.size();
  status_offset_ = header.find("\nstatus ") + 1;
  error_.clear();
  reported_error_.clear();
  jobs_.clear();
  free_.clear();
  for (int n = 1; n < int(mapped_); ++n)
    free_.push_back(n);
  current_ = 0;
  stage_len_ = 0;
  frames_ = staged_frames_ = 0;
  marks_.clear();
  last_counted_ = {};
  status_ = contents.status;
  status_extra_ = contents.status_extra;
  longest_wait_us_ = longest_write_us_ = 0;
  if (int err = pwrite_all(fd_, header.data(), header.size(), 0, ENOSPC)) {
    fail("cannot write", err);
    close_file();
    return make_error(EIO, error_);
  }
  stage_at_ = handed_end_ = count_at_ = written_ = header.size();
  // Without a target description the header cannot be padded: no direct writes.
  if (header_size_ % kBlock == 0)
    dfd_ = ::open(path_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  direct_ = dfd_ >= 0;
  start_writer();
  return ok();
}

// The kept stages (the first kStages, mapped when the stream begins: at
// tstart, or at `monitor gdbtrace stream` with gdb waiting) are made of huge
// pages where the kernel has them, and made present now. Each direct write
// pins the pages it writes from: with 4 KB pages that pinning (gup_fast) and
// the bio's page list were ~8 % of the stub's CPU per streamed frame, and the
// stages' copies took a TLB miss every 4 KB (perf, 4 threads on 2 CPUs;
// 12 s runs: 0.089-0.096 us of stub CPU a frame before, 0.079-0.080 after).
// The stages mapped during a disk stall stay small pages, faulted in as
// written: a huge page's first touch during a run may wait for the kernel
// to compact memory (docs/benchmarks.md: huge pages on the trace buffer).
bool TraceStream::map_stage(size_t n) {
  if (stages_[n].get())
    return true;
  constexpr size_t kHuge = 2 << 20;
  const bool kept = n < kStages;
  const size_t span = kept ? kStageRoom + kHuge : kStageRoom;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return false;
  if (!kept) {
    stages_[n] = Mapping(p, kStageRoom);
    return true;
  }
  // A huge page needs a 2 MB-aligned start: what is mapped before and after
  // the aligned stage is given back.
  auto* head = static_cast<uint8_t*>(p);
  auto* at = reinterpret_cast<uint8_t*>((uintptr_t(head) + kHuge - 1) & ~uintptr_t(kHuge - 1));
  if (at > head)
    ::munmap(head, size_t(at - head));
  if (size_t tail = span - size_t(at - head) - kStageRoom)
    ::munmap(at + kStageRoom, tail);
  stages_[n] = Mapping(at, kStageRoom);
  // Neither is needed: without them the stage is small pages written in.
  ::madvise(at, kStageRoom, MADV_HUGEPAGE);
  populate_for_write(at, at + kStageRoom);
  return true;
}

void TraceStream::start_writer() {
  stopping_ = false;
  busy_ = false;
  try {
    writer_ = std::thread([this] { writer_loop(); });
  } catch (const std::system_error&) { // no thread to be had: submit() writes itself
  }
}

// Runs every job handed over, then ends the writer's thread.
void TraceStream::stop_writer() {
  if (!writer_.joinable())
    return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  writer_.join();
}

void TraceStream::writer_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty())
      return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    run_job(job);
    lock.lock();
    if (job.stage >= int(kStages) && jobs_.empty()) { // caught up: its pages go back
      lock.unlock();
      ::madvise(stage(job.stage), kStageRoom, MADV_DONTNEED);
      lock.lock();
    }
    if (job.stage >= 0)
      free_.push_back(job.stage);
    busy_ = false;
    changed_.notify_all();
  }
}

void TraceStream::submit(Job job) {
  if (writer_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    changed_.notify_all();
    return;
  }
  run_job(job);
  std::lock_guard lock(mutex_);
  if (job.stage >= 0)
    free_.push_back(job.stage);
}

void TraceStream::settle() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !writer_.joinable() || (jobs_.empty() && !busy_); });
}

// On the writer's thread (after a failure, jobs are dropped: the file
// already ends at its last whole frame).
void TraceStream::run_job(Job& job) {
  if (failed())
    return;
  if (!job.header.empty()) {
    if (!write_header_part(job.header, 0))
      return;
    status_offset_ = job.header.find("\nstatus ") + 1;
  }
  if (job.stage >= 0 && job.len) {
    const uint8_t* data = stage(job.stage);
    const auto from = std::chrono::steady_clock::now();
    int err = direct_ ? pwrite_all(dfd_, data, job.len, job.at, ENOSPC)
                      : pwrite_all(fd_, data, job.len, job.at, ENOSPC);
    if (err == EINVAL && direct_) { // the file system refuses direct writes after all
      direct_ = false;
      err = pwrite_all(fd_, data, job.len, job.at, ENOSPC);
    }
    if (err) {
      cut_back(err);
      return;
    }
    const auto took = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - from);
    std::lock_guard lock(mutex_);
    longest_write_us_ = std::max(longest_write_us_, uint64_t(took.count()));
    written_ = std::max(written_, job.at + job.len);
    if (job.counted.frames > frames_) {
      frames_ = job.counted.frames;
      count_at_ = job.counted.whole_end;
    }
  }
  write_status_line();
}

// After the frames: the count in the file never exceeds the frames it holds.
void TraceStream::write_status_line() {
  TfileContents c;
  {
    std::lock_guard lock(mutex_);
    c.status = status_;
    c.status.frames = frames_;
    c.status_extra = status_extra_;
  }
  c.fixed_width = true;
  write_header_part(tfile_status_line(c), status_offset_);
}

void TraceStream::cut_back(int err) {
  uint64_t at;
  {
    std::lock_guard lock(mutex_);
    at = count_at_;
  }
  if (::ftruncate(fd_, off_t(at)) != 0) {
    // The torn tail stays: say so rather than claim a clean file.
    fail("cannot write (and cannot cut back a partly written frame in)", err);
    return;
  }
  fail("cannot write", err);
  std::lock_guard lock(mutex_);
  written_ = at;
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
  if (fd_ < 0 || failed()) {
    std::string e = error();
    return make_error(EIO, e.empty() ? "the stream is not open" : e);
  }
  contents.fixed_width = true;
  contents.pad_to = header_size_;
  contents.status.frames = frames(); // the writer's status line after it says the rest
  Job job;
  job.header = tfile_header(contents);
  if (job.header.size() != header_size_)
    return make_error(ENOSPC, "the header of " + path_ + " has no room left for the tracepoints " +
                                  "defined during the run (" + std::to_string(kHeaderRoom) +
                                  " bytes kept for them)");
  submit(std::move(job)); // before every frame staged from now on
  return ok();
}

void TraceStream::note_frames(std::span<const uint8_t> frames) {
  uint64_t start = stage_at_ + stage_len_;
  for (size_t at = 0; at + GT_TFRAME_HEADER_SIZE <= frames.size();) {
    const size_t len = GT_TFRAME_HEADER_SIZE + gt_tframe_size(frames.data() + at);
    const uint64_t end = start + len;
    for (uint64_t b = (start & ~uint64_t(kBlock - 1)) + kBlock; b <= end; b += kBlock)
      marks_.push_back(b == end ? Mark{b, {staged_frames_ + 1, end}}
                                : Mark{b, {staged_frames_, start}});
    ++staged_frames_;
    start = end;
    at += len;
  }
}

TraceStream::Counted TraceStream::counted_at(uint64_t at) {
  for (; !marks_.empty() && marks_.front().at <= at; marks_.pop_front())
    if (marks_.front().at == at)
      last_counted_ = marks_.front().counted;
  return last_counted_;
}

int TraceStream::take_free_stage(bool may_wait) {
  std::unique_lock lock(mutex_);
  if (free_.empty() && mapped_ < kMaxStages && map_stage(mapped_))
    return int(mapped_++);
  if (free_.empty() && may_wait) {
    auto from = std::chrono::steady_clock::now();
    changed_.wait(lock, [&] { return !free_.empty(); });
    auto waited = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - from);
    longest_wait_us_ = std::max(longest_wait_us_, uint64_t(waited.count()));
  }
  if (free_.empty())
    return -1;
  // The lowest: a stage mapped for a stall is used only in the next one
  // (its pages were given back: each reuse faults them in again).
  auto lowest = std::min_element(free_.begin(), free_.end());
  int n = *lowest;
  free_.erase(lowest);
  return n;
}

bool TraceStream::hand_over(bool flush, bool may_wait) {
  if (failed())
    return false;
  const uint64_t end = stage_at_ + stage_len_;
  const uint64_t boundary = end & ~uint64_t(kBlock - 1);
  // A direct flush writes the partial block too, padded: the next write
  // covers that block again, so the next stage starts with it.
  const uint64_t write_end = !flush ? boundary : direct_ ? round_up(end) : end;
  const uint64_t keep_from = flush && !direct_ ? end : boundary;
  if (write_end <= stage_at_ || (flush && end == handed_end_))
    return true; // nothing new to write
  const int next = take_free_stage(may_wait);
  if (next < 0)
    return true; // every stage is being written: the next hand-over takes these frames
  _mm_sfence();  // copy_to_stage's stores reach memory before the writer reads the stage
  Job job;
  job.stage = current_;
  job.at = stage_at_;
  job.len = size_t(write_end - stage_at_);
  if (write_end > end) // zeros after the last frame read as gdb's end marker
    std::memset(stage(current_) + stage_len_, 0, size_t(write_end - end));
  if (flush) {
    marks_.clear();
    job.counted = last_counted_ = {staged_frames_, end}; // staged frames are whole
  } else {
    job.counted = counted_at(boundary);
  }
  const size_t kept = size_t(end - keep_from);
  std::memcpy(stage(next), stage(current_) + (keep_from - stage_at_), kept);
  current_ = next;
  stage_at_ = keep_from;
  stage_len_ = kept;
  handed_end_ = std::min(write_end, end);
  submit(std::move(job));
  return true;
}

void TraceStream::add(std::span<const uint8_t> frames) {
  if (fd_ < 0 || failed())
    return;
  note_frames(frames);
  while (!frames.empty()) {
    size_t mark = direct_ ? kDirectBytes : kBufferedBytes;
    size_t n = std::min(frames.size(), kStageRoom - stage_len_);
    copy_to_stage(stage(current_) + stage_len_, frames.data(), n);
    stage_len_ += n;
    frames = frames.subspan(n);
    if (stage_len_ >= mark && !hand_over(false, true))
      return;
  }
}

Result<void> TraceStream::flush(TraceStatus status, const std::string& status_extra) {
  if (fd_ >= 0) {
    {
      std::lock_guard lock(mutex_);
      status_ = std::move(status);
      status_extra_ = status_extra;
    }
    hand_over(true, false);
  }
  std::string e = error();
  if (e.empty() || e == reported_error_)
    return ok();
  reported_error_ = e;
  return make_error(EIO, e);
}

Result<void> TraceStream::finish(TfileContents contents) {
  if (fd_ < 0)
    return flush(contents.status, contents.status_extra);
  {
    std::lock_guard lock(mutex_);
    status_ = contents.status;
    status_extra_ = contents.status_extra;
  }
  stop_writer(); // every stage handed over is in the file
  // The rest of the stage through the page cache: no direct write follows.
  if (!failed()) {
    if (int err = pwrite_all(fd_, stage(current_), stage_len_, stage_at_, ENOSPC)) {
      cut_back(err);
    } else {
      std::lock_guard lock(mutex_);
      frames_ = staged_frames_;
      count_at_ = stage_at_ + stage_len_;
    }
  }
  // Also after a failed write (cut back to a frame boundary): the marker and
  // the final counts may still fit, and make the file whole. A padded last
  // block is cut off after the marker.
  static const uint8_t end_marker[4] = {0, 0, 0, 0};
  const uint64_t end = count_at_;
  if (int err = pwrite_all(fd_, end_marker, sizeof end_marker, end, ENOSPC);
      err || ::ftruncate(fd_, off_t(end + sizeof end_marker)) != 0) {
    fail("cannot end", err ? err : errno);
  } else {
    written_ = end + sizeof end_marker;
    contents.fixed_width = true;
    contents.status.frames = frames_;
    contents.pad_to = header_size_;
    std::string header = tfile_header(contents);
    if (header.size() == header_size_)
      write_header_part(header, 0);
    else
      write_header_part(tfile_status_line(contents), status_offset_);
  }
  close_file();
  std::string e = error();
  if (e.empty() || e == reported_error_)
    return ok();
  reported_error_ = e;
  return make_error(EIO, e);
}

} // namespace gdbtrace
