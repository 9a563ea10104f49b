// The trace collector's pieces called directly: the JSON line writer, record formatting, interned
// names, and one whole trace written in this process (no CUDA backend: no devices, no CUPTI).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/options.h"
#include "core/runtime.h"
#include "trace/format.h"
#include "trace/names.h"
#include "trace/out.h"
#include "trace/record.h"
#include "trace/trace.h"

namespace gms::trace {
namespace {

// Everything an Out writes, through a pipe-less temporary file.
class Captured {
 public:
  Captured() {
    char path[] = "/tmp/gms-trace-test-XXXXXX";
    fd_ = mkstemp(path);
    unlink(path);
  }
  ~Captured() { close(fd_); }
  int fd() const { return fd_; }
  std::string text() const {
    std::string s;
    off_t end = lseek(fd_, 0, SEEK_END);
    s.resize(static_cast<size_t>(end));
    if (end > 0) {
      EXPECT_EQ(pread(fd_, s.data(), s.size(), 0), end);
    }
    return s;
  }

 private:
  int fd_ = -1;
};

std::string written(void (*fill)(Out&), size_t cap = 4096) {
  Captured c;
  std::vector<char> buf(cap);
  Out out(buf.data(), buf.size());
  out.set_fd(c.fd());
  fill(out);
  EXPECT_TRUE(out.flush());
  return c.text();
}

TEST(TraceOut, NumbersAndAddresses) {
  EXPECT_EQ(written([](Out& o) { o.u64(0).chr(' ').u64(UINT64_MAX); }), "0 18446744073709551615");
  EXPECT_EQ(written([](Out& o) { o.i64(-1).chr(' ').i64(INT64_MIN).chr(' ').i64(42); }),
            "-1 -9223372036854775808 42");
  EXPECT_EQ(written([](Out& o) { o.addr(0).chr(' ').addr(0x7fffdeadbeefull); }), "\"0x0\" \"0x7fffdeadbeef\"");
  EXPECT_EQ(written([](Out& o) { o.open("x").key("t").i64(5).key("ok").boolean(true).close(); }),
            "{\"type\":\"x\",\"t\":5,\"ok\":true}\n");
}

TEST(TraceOut, StringsAreEscapedAndAlwaysValidUtf8) {
  EXPECT_EQ(written([](Out& o) { o.str(nullptr); }), "null");
  EXPECT_EQ(written([](Out& o) { o.str("a\"b\\c\nd\te\x01\x7f"); }), "\"a\\\"b\\\\c\\nd\\te\\u0001\\u007f\"");
  EXPECT_EQ(written([](Out& o) { o.str("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80"); }),
            "\"caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80\"");
  // A stray byte, a cut sequence, an overlong form, a surrogate: each byte becomes U+FFFD.
  EXPECT_EQ(written([](Out& o) { o.str("\xff|\xe6\x97|\xc0\x80|\xed\xa0\x80"); }),
            "\"\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(written([](Out& o) { o.str("a\0b", 3); }), "\"a\\u0000b\"");
}

TEST(TraceOut, LinesLongerThanTheBufferAreWrittenWhole) {
  std::string big(10000, 'k');
  static std::string s_big;
  s_big = big;
  std::string got = written([](Out& o) { o.open("kernel").key("name").str(s_big.c_str()).close(); }, 16);
  EXPECT_EQ(got, "{\"type\":\"kernel\",\"name\":\"" + big + "\"}\n");
}

TEST(TraceOut, AWriteErrorLatches) {
  char buf[8];
  Out out(buf, sizeof(buf));
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  close(fds[1]);  // a closed descriptor: EBADF
  out.set_fd(fds[1]);
  out.raw("0123456789");  // overflows the buffer: the write fails
  EXPECT_TRUE(out.failed());
  EXPECT_EQ(out.error(), EBADF);
  EXPECT_FALSE(out.flush());
}

TEST(TraceNames, InternedOncePerDistinctString) {
  EXPECT_EQ(names::intern(nullptr), 0u);
  EXPECT_EQ(names::name(0), nullptr);
  uint32_t a = names::intern("void add<float>(float*, float const*, unsigned long)");
  uint32_t b = names::intern("another");
  std::string copy = "void add<float>(float*, float const*, unsigned long)";
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(names::intern(copy.c_str()), a);
  EXPECT_STREQ(names::name(a), copy.c_str());
  EXPECT_STREQ(names::name(b), "another");
}

std::string format(const Record& r) {
  static Record s_r;
  s_r = r;
  return written([](Out& o) { format_record(o, s_r); });
}

Record rec(Type t, int64_t time, int device = -1) {
  Record r{};
  r.type = t;
  r.t = time;
  r.device = device;
  return r;
}

TEST(TraceFormat, ShimEvents) {
  Record a = rec(Type::alloc, 10, 0);
  a.v[0] = 0x1000;
  a.v[1] = 4096;
  a.k1 = static_cast<uint8_t>(MemKind::managed);
  a.k2 = static_cast<uint8_t>(Placement::managed);
  a.k3 = static_cast<uint8_t>(Origin::cuMemAlloc);
  EXPECT_EQ(format(a),
            "{\"type\":\"alloc\",\"t\":10,\"ptr\":\"0x1000\",\"bytes\":4096,\"device\":0,\"api\":\"cuMemAlloc\","
            "\"kind\":\"managed\",\"placement\":\"managed\"}\n");
  Record f = rec(Type::free, 11);
  f.v[0] = 0x1000;
  f.v[1] = 4096;
  f.k1 = static_cast<uint8_t>(Family::host_free);
  EXPECT_EQ(format(f), "{\"type\":\"free\",\"t\":11,\"ptr\":\"0x1000\",\"bytes\":4096,\"api\":\"cuMemFreeHost\"}\n");
  Record c = rec(Type::copy, 12);
  c.v[0] = 8;
  c.v[1] = 99;
  c.v[2] = reinterpret_cast<uintptr_t>("cuMemcpyDtoD_v2");
  c.k1 = static_cast<uint8_t>(Direction::dtod);
  c.k2 = kNone;
  c.k3 = static_cast<uint8_t>(CopyPath::driver);
  EXPECT_EQ(format(c),
            "{\"type\":\"copy\",\"t\":12,\"api\":\"cuMemcpyDtoD_v2\",\"bytes\":8,\"dir\":\"dtod\",\"path\":\"driver\","
            "\"dur_ns\":99}\n");
  c.k1 = static_cast<uint8_t>(Direction::htod);
  c.k2 = static_cast<uint8_t>(HostKind::pinned);
  c.k3 = static_cast<uint8_t>(CopyPath::staged);
  EXPECT_NE(format(c).find("\"dir\":\"htod\",\"host_kind\":\"pinned\",\"path\":\"staged\""), std::string::npos);
  Record d = rec(Type::decision, 13, 1);
  d.v[0] = 0x2000;
  d.v[1] = 1 << 20;
  d.v[2] = reinterpret_cast<uintptr_t>("spill_managed");
  d.v[3] = reinterpret_cast<uintptr_t>("over the device budget");
  EXPECT_EQ(format(d),
            "{\"type\":\"decision\",\"t\":13,\"what\":\"spill_managed\",\"ptr\":\"0x2000\",\"bytes\":1048576,"
            "\"device\":1,\"reason\":\"over the device budget\"}\n");
}

TEST(TraceFormat, CuptiRecords) {
  Record k = rec(Type::kernel, -5, 0);
  k.v[0] = 100;
  k.v[1] = names::intern("k<\"q\">");
  k.v[2] = 7;
  k.v[3] = 42;
  k.v[4] = 1, k.v[5] = 2, k.v[6] = 3, k.v[7] = 256, k.v[8] = 1, k.v[9] = 1;
  EXPECT_EQ(format(k),
            "{\"type\":\"kernel\",\"t\":-5,\"end\":100,\"name\":\"k<\\\"q\\\">\",\"device\":0,\"stream\":7,"
            "\"correlation\":42,\"grid\":[1,2,3],\"block\":[256,1,1]}\n");
  Record u = rec(Type::um, 1, 0);
  u.v[0] = 2;
  u.v[1] = 0x7f0000000000;
  u.v[2] = 65536;
  u.v[3] = 65536;
  u.k1 = static_cast<uint8_t>(UmCounter::htod);
  u.k2 = static_cast<uint8_t>(UmCause::user_prefetch);
  u.k3 = kNone;
  EXPECT_EQ(format(u),
            "{\"type\":\"um\",\"t\":1,\"end\":2,\"counter\":\"htod\",\"address\":\"0x7f0000000000\",\"bytes\":65536,"
            "\"value\":65536,\"cause\":\"user_prefetch\",\"device\":0}\n");
  Record r = rec(Type::range, 3);
  r.v[0] = 9;
  r.v[1] = names::intern("step");
  r.v[2] = 0;
  r.v[3] = 1234;
  EXPECT_EQ(format(r), "{\"type\":\"range\",\"t\":3,\"end\":9,\"name\":\"step\",\"domain\":null,\"tid\":1234}\n");
  Record m = rec(Type::memcpy, 4, 0);
  m.v[0] = 5;
  m.v[1] = 10;
  m.k1 = static_cast<uint8_t>(MemcpyKind::htod);
  m.k2 = static_cast<uint8_t>(MemoryKind::pageable);
  m.k3 = static_cast<uint8_t>(MemoryKind::device);
  EXPECT_NE(format(m).find("\"copy_kind\":\"htod\",\"src_kind\":\"pageable\",\"dst_kind\":\"device\""),
            std::string::npos);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

uint64_t number_after(const std::string& line, const std::string& key) {
  size_t at = line.find("\"" + key + "\":");
  EXPECT_NE(at, std::string::npos) << key << " in " << line;
  return at == std::string::npos ? 0 : std::strtoull(line.c_str() + at + key.size() + 3, nullptr, 10);
}

// One whole trace in this process: the first event opens the file (mode 0600) and writes the header;
// 8 threads write events while the writer thread drains; every event is either in the file or
// counted as dropped; finish() writes the end line.
TEST(TraceCollector, AWholeTrace) {
  char dir[] = "/tmp/gms-trace-unit-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  Options o = default_options();
  std::string pattern = std::string(dir) + "/t-%p.jsonl";
  ASSERT_TRUE(parse_value(pattern.c_str(), &o.trace));
  o.trace_sites.bytes = 0;
  configure(o);
  ASSERT_TRUE(enabled());
  constexpr int kThreads = 8, kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kEach; ++i) {
        Region r;
        r.base = (static_cast<uintptr_t>(t) << 32) + static_cast<uintptr_t>(i) * 4096;
        r.size = 4096;
        r.device = 0;
        alloc(r);
        CopyScope scope("cuMemcpyHtoD_v2");
        copy(Direction::htod, HostKind::pageable, 4096);
      }
    });
  }
  for (auto& th : threads) th.join();
  finish();
  EXPECT_FALSE(enabled());
  std::string path = std::string(dir) + "/t-" + std::to_string(getpid()) + ".jsonl";
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::vector<std::string> lines = lines_of(path);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines.front().rfind("{\"type\":\"header\",\"format\":\"gpumemshim-trace\",\"version\":1,", 0), 0u);
  EXPECT_NE(lines.front().find("\"devices\":[],\"cupti\":\"no CUDA backend\""), std::string::npos);
  const std::string& end = lines.back();
  ASSERT_EQ(end.rfind("{\"type\":\"end\"", 0), 0u) << end;
  uint64_t events = 0, allocs = 0, copies = 0, dropped_lines = 0;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind("{\"type\":\"dropped\"", 0) == 0) {
      dropped_lines += number_after(l, "records");
      continue;
    }
    ++events;
    allocs += l.rfind("{\"type\":\"alloc\"", 0) == 0;
    copies += l.rfind("{\"type\":\"copy\"", 0) == 0 && l.find("\"api\":\"cuMemcpyHtoD_v2\"") != std::string::npos;
  }
  EXPECT_EQ(number_after(end, "events"), events);
  EXPECT_EQ(number_after(end, "dropped"), dropped_lines);
  EXPECT_EQ(events + dropped_lines, uint64_t{2} * kThreads * kEach) << "every event written or counted as dropped";
  EXPECT_EQ(allocs + copies, events);
  EXPECT_FALSE(flush()) << "nothing to flush once the trace has ended";
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace gms::trace
