#include "trace/trace_status.h"

#include "common/hex.h"

namespace gdbtrace {

const char* stop_reason_word(const TraceStatus& st) {
  if (!st.ever_ran || st.running)
    return "tnotrun";
  switch (st.reason) {
  case TraceStopReason::None:
  case TraceStopReason::Requested:
    return "tstop";
  case TraceStopReason::BufferFull:
    return "tfull";
  case TraceStopReason::PassCount:
    return "tpasscount";
  case TraceStopReason::Error:
    return "terror";
  case TraceStopReason::Disconnected:
    return "tdisconnected";
  }
  return "tstop";
}

std::string format_qtstatus(const TraceStatus& st) {
  std::string reason = stop_reason_word(st);
  // gdbserver: terror and tstop carry hex text (tstop's possibly empty).
  if (reason == "terror" || reason == "tstop")
    reason += ":" + hex::encode(st.stop_text);
  std::string out;
  out += st.running ? "T1;" : "T0;";
  uint32_t tp = st.running || !st.ever_ran ? 0 : st.stop_tp;
  out += reason + ":" + hex::u64(tp) + ";";
  out += "tframes:" + hex::u64(st.frames) + ";tcreated:" + hex::u64(st.created) + ";";
  out += "tfree:" + hex::u64(st.free) + ";tsize:" + hex::u64(st.size) + ";";
  out += std::string("circular:") + (st.circular ? "1" : "0") + ";";
  out += std::string("disconn:") + (st.disconnected_tracing ? "1" : "0") + ";";
  out += "starttime:" + hex::u64(uint64_t(st.start_time)) +
         ";stoptime:" + hex::u64(uint64_t(st.stop_time)) + ";";
  out += "username:" + hex::encode(st.user) + ";notes:" + hex::encode(st.notes) + ":";
  return out;
}

std::string format_tfile_status(const TraceStatus& st) {
  std::string word = stop_reason_word(st);
  std::string out = std::string("status ") + (st.running ? "1" : "0") + ";" + word;
  if (word == "terror" || word == "tstop")
    out += ":" + hex::encode(st.stop_text);
  out += ":" + hex::u64(st.running || !st.ever_ran ? 0 : st.stop_tp);
  out += ";tframes:" + hex::u64(st.frames) + ";tcreated:" + hex::u64(st.created);
  out += ";tfree:" + hex::u64(st.free) + ";tsize:" + hex::u64(st.size);
  if (st.disconnected_tracing)
    out += ";disconn:1";
  if (st.circular)
    out += ";circular:1";
  if (st.start_time)
    out += ";starttime:" + hex::u64(uint64_t(st.start_time));
  if (st.stop_time)
    out += ";stoptime:" + hex::u64(uint64_t(st.stop_time));
  if (!st.notes.empty())
    out += ";notes:" + hex::encode(st.notes);
  if (!st.user.empty())
    out += ";username:" + hex::encode(st.user);
  return out + "\n";
}

} // namespace gdbtrace
