#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/log.h"
#include "core/stats.h"

namespace gms {
namespace {

std::string capture(void (*fn)(const Stats&, int), const Stats& s) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  fn(s, fds[1]);
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  return out;
}

std::string text(const Stats& s) {
  return capture([](const Stats& st, int fd) { st.print_text(fd); }, s);
}
std::string json(const Stats& s) {
  return capture([](const Stats& st, int fd) { st.print_json(fd, 1234); }, s);
}

TEST(Line, Formats) {
  Line l;
  l.u64(0).chr(' ').u64(18446744073709551615ull).chr(' ').i64(-42).chr(' ').hex(0xbeef);
  EXPECT_STREQ(l.data(), "0 18446744073709551615 -42 0xbeef");
  l.clear();
  l.bytes(512).str("|").bytes(1536).str("|").bytes(3ull << 30);
  EXPECT_STREQ(l.data(), "512 B|1.50 KiB|3.00 GiB");
  l.clear();
  l.fixed(2.345, 2).str("|").fixed(-0.5, 1).str("|").fixed(7, 0);
  EXPECT_STREQ(l.data(), "2.35|-0.5|7");
  l.clear();
  l.str("ab").pad_to(5).str("c");
  EXPECT_STREQ(l.data(), "ab   c");
}

TEST(Line, DecimalEdges) {
  Line l;
  l.i64(INT64_MIN).chr(' ').i64(INT64_MAX).chr(' ').i64(0).chr(' ').u64(UINT64_MAX);
  EXPECT_STREQ(l.data(), "-9223372036854775808 9223372036854775807 0 18446744073709551615");
}

TEST(Line, TruncatesInsteadOfOverflowing) {
  Line l;
  std::string big(5000, 'x');
  l.str(big.c_str());
  EXPECT_EQ(l.size(), 1023u);
  l.str("more").u64(12345);
  EXPECT_EQ(l.size(), 1023u);
}

TEST(Stats, CountsCallsBytesAndErrors) {
  Stats s;
  s.call(Family::mem_alloc, 100, true);
  s.call(Family::mem_alloc, 50, true);
  s.call(Family::mem_alloc, 999, false);
  EXPECT_EQ(s.family(Family::mem_alloc).calls, 3u);
  EXPECT_EQ(s.family(Family::mem_alloc).bytes, 150u) << "failed calls move no bytes";
  EXPECT_EQ(s.family(Family::mem_alloc).errors, 1u);
}

TEST(Stats, PeakTracksTheHighWaterMarkAndLiveNeverWraps) {
  Stats s;
  s.live_add(MemKind::device, 100);
  s.live_add(MemKind::device, 50);
  s.live_sub(MemKind::device, 120);
  s.live_add(MemKind::device, 10);
  EXPECT_EQ(s.live(MemKind::device), 40u);
  EXPECT_EQ(s.peak(MemKind::device), 150u);
  s.live_sub(MemKind::device, 1000);
  EXPECT_EQ(s.live(MemKind::device), 0u);
}

TEST(Stats, ResetKeepsLiveButForgetsCounts) {
  Stats s;
  s.call(Family::memcpy, 10, true);
  s.launch(LaunchKind::graph, true);
  s.live_add(MemKind::host_block, 4096);
  s.reset();
  EXPECT_EQ(s.family(Family::memcpy).calls, 0u);
  EXPECT_EQ(s.launches(LaunchKind::graph), 0u);
  EXPECT_EQ(s.live(MemKind::host_block), 4096u);
  EXPECT_EQ(s.peak(MemKind::host_block), 4096u);
}

TEST(Stats, TextAndJsonShowTheSameNumbers) {
  Stats s;
  s.call(Family::memcpy, 3ull << 30, true);
  s.copy(Direction::htod, 3ull << 30);
  s.copy_host(HostKind::pinned, 3ull << 30);
  s.launch(LaunchKind::kernel, true);
  s.launch(LaunchKind::kernel, true);
  s.launch(LaunchKind::graph, false);
  s.live_add(MemKind::managed, 1ull << 30);
  s.anomaly(Anomaly::unknown_frees);
  std::string t = text(s);
  EXPECT_NE(t.find("memcpy"), std::string::npos) << t;
  EXPECT_NE(t.find("3.00 GiB"), std::string::npos) << t;
  EXPECT_NE(t.find("htod"), std::string::npos) << t;
  EXPECT_NE(t.find("pinned"), std::string::npos) << t;
  EXPECT_NE(t.find("managed"), std::string::npos) << t;
  EXPECT_NE(t.find("1 frees of pointers the shim never saw"), std::string::npos) << t;
  EXPECT_EQ(t.find("mem_alloc_managed"), std::string::npos) << "rows with no calls are left out:\n" << t;

  std::string j = json(s);
  EXPECT_NE(j.find("\"pid\": 1234"), std::string::npos) << j;
  EXPECT_NE(j.find("\"memcpy\": {\"calls\": 1, \"bytes\": 3221225472, \"errors\": 0}"), std::string::npos) << j;
  EXPECT_NE(j.find("\"htod\": {\"calls\": 1, \"bytes\": 3221225472}"), std::string::npos) << j;
  EXPECT_NE(j.find("\"kernel\": 2"), std::string::npos) << j;
  EXPECT_NE(j.find("\"launch\": {\"calls\": 3, \"bytes\": 0, \"errors\": 1}"), std::string::npos)
      << "the launch family counts every launch, the failed one too:\n" << j;
  EXPECT_NE(j.find("\"managed\": 1073741824"), std::string::npos) << j;
  EXPECT_NE(j.find("\"unknown_frees\": 1"), std::string::npos) << j;
  // Every family appears in JSON, used or not, so scripts can rely on the keys.
  EXPECT_NE(j.find("\"mem_alloc_managed\": {\"calls\": 0"), std::string::npos) << j;
  // Balanced braces and no trailing commas before a closing brace.
  int depth = 0;
  for (size_t i = 0; i < j.size(); ++i) {
    if (j[i] == '{') ++depth;
    if (j[i] == '}') {
      --depth;
      size_t k = i;
      while (k > 0 && (j[k - 1] == ' ' || j[k - 1] == '\n')) --k;
      EXPECT_NE(j[k - 1], ',') << "trailing comma before } at " << i;
    }
  }
  EXPECT_EQ(depth, 0);
}

}  // namespace
}  // namespace gms
