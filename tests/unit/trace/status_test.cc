#include <gtest/gtest.h>

#include "server/trace_report_format.h"
#include "trace/trace_status.h"

using namespace gdbtrace;

TEST(QtStatus, NotRunYet) {
  TraceStatus st;
  st.size = 0x500000;
  st.free = 0x500000;
  EXPECT_EQ(format_qtstatus(st), "T0;tnotrun:0;tframes:0;tcreated:0;tfree:500000;tsize:500000;"
                                 "circular:0;disconn:0;starttime:0;stoptime:0;username:;notes::");
}

TEST(QtStatus, StoppedByUserWithNoteAndNotes) {
  TraceStatus st;
  st.ever_ran = true;
  st.reason = TraceStopReason::Requested;
  st.stop_text = "ok";
  st.frames = 3;
  st.created = 3;
  st.size = 0x1000;
  st.free = 0x800;
  st.circular = true;
  st.disconnected_tracing = true;
  st.start_time = 0x1234;
  st.stop_time = 0x5678;
  st.user = "me";
  st.notes = "hi";
  EXPECT_EQ(format_qtstatus(st), "T0;tstop:6f6b:0;tframes:3;tcreated:3;tfree:800;tsize:1000;"
                                 "circular:1;disconn:1;starttime:1234;stoptime:5678;"
                                 "username:6d65;notes:6869:");
}

TEST(QtStatus, StopReasons) {
  TraceStatus st;
  st.ever_ran = true;
  st.reason = TraceStopReason::PassCount;
  st.stop_tp = 2;
  EXPECT_EQ(format_qtstatus(st).substr(0, 16), "T0;tpasscount:2;");
  st.reason = TraceStopReason::BufferFull;
  st.stop_tp = 0;
  EXPECT_EQ(format_qtstatus(st).substr(0, 11), "T0;tfull:0;");
  st.reason = TraceStopReason::Disconnected;
  EXPECT_EQ(format_qtstatus(st).substr(0, 19), "T0;tdisconnected:0;");
  st.reason = TraceStopReason::Error;
  st.stop_text = "x";
  st.stop_tp = 4;
  EXPECT_EQ(format_qtstatus(st).substr(0, 15), "T0;terror:78:4;");
  st.running = true;
  EXPECT_EQ(format_qtstatus(st).substr(0, 14), "T1;tnotrun:0;t");
}

TEST(TfileStatus, LikeGdbsWriter) {
  TraceStatus st;
  st.ever_ran = true;
  st.reason = TraceStopReason::Requested;
  st.frames = 2;
  st.created = 2;
  st.size = 0x100;
  st.free = 0x10;
  st.start_time = 0xa;
  EXPECT_EQ(format_tfile_status(st),
            "status 0;tstop::0;tframes:2;tcreated:2;tfree:10;tsize:100;starttime:a\n");
}

// `monitor gdbtrace status` and the status JSON show the stream and the
// collectors' drops by CPU (only when some CPU dropped, in the text).
TEST(ReportFormat, StreamAndDropsByCpu) {
  TraceReport r;
  r.status.ever_ran = true;
  r.status.running = true;
  std::string text = format_report_text(r);
  EXPECT_NE(text.find("stream: off\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("drops by CPU"), std::string::npos) << text;
  r.stream.path = "/tmp/x.tf";
  r.stream.writing = true;
  r.stream.frames = 3;
  r.stream.bytes = 700;
  r.drops_by_cpu = {5, 0, 7};
  text = format_report_text(r);
  EXPECT_NE(text.find("stream: /tmp/x.tf, writing: 3 frames, 700 bytes so far\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("drops by CPU (staging ring full): cpu0 5, cpu1 0, cpu2 7\n"),
            std::string::npos)
      << text;
  std::string json = format_report_json(r);
  EXPECT_NE(json.find("\"streaming\":{\"path\":\"/tmp/x.tf\",\"writing\":true,\"frames\":3,"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"drops_by_cpu\":[5,0,7]"), std::string::npos) << json;
  r.stream.writing = false;
  r.stream.error = "cannot write /tmp/x.tf: No space left on device";
  EXPECT_NE(format_stream_line(r.stream, false)
                .find("last run: 3 frames, 700 bytes (stopped early: cannot write"),
            std::string::npos);
}
