// Unit tests of `gpumemshim report`'s pieces (tools/report): the per-line JSON parser, the wall
// clock parser, the reader's refusals, the attribution of unified-memory records to regions,
// kernels and ranges, and the number formats. The command end to end is test_report.py's.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "report/align.h"
#include "report/json_parse.h"
#include "report/model.h"
#include "report/sweep.h"
#include "report/trace_reader.h"
#include "report/units.h"

namespace gms::report {
namespace {

// ---- JSON ----

TEST(ReportJson, ParsesObjectsArraysAndScalars) {
  JsonDoc doc;
  JsonError err;
  ASSERT_TRUE(doc.parse(R"({"a": 1, "b": [true, false, null], "c": {"d": "x"}, "e": -2.5e3})", &err)) << err.message;
  JsonRef r = doc.root();
  EXPECT_TRUE(r.get("a").is_int());
  EXPECT_EQ(r.get("a").as_int(), 1);
  EXPECT_EQ(r.get("b").size(), 3u);
  EXPECT_TRUE(r.get("b").first().as_bool());
  EXPECT_TRUE(r.get("b").first().next().next().is(JsonType::kNull));
  EXPECT_EQ(r.get("c").get("d").as_string(), "x");
  EXPECT_FALSE(r.get("e").is_int());
  EXPECT_DOUBLE_EQ(r.get("e").as_double(), -2500);
  EXPECT_FALSE(r.get("missing").valid());
}

TEST(ReportJson, KeepsIntegersExactBeyondDoublePrecision) {
  JsonDoc doc;
  JsonError err;
  ASSERT_TRUE(doc.parse(R"({"big": 9007199254740993, "max": 9223372036854775807})", &err));
  EXPECT_EQ(doc.root().get("big").as_int(), 9007199254740993LL);
  EXPECT_EQ(doc.root().get("max").as_int(), INT64_MAX);
}

TEST(ReportJson, DecodesEscapes) {
  JsonDoc doc;
  JsonError err;
  ASSERT_TRUE(doc.parse(R"(["a\"b\\c\/\n\t", "\u00e9\u20ac", "\ud83d\ude00"])", &err)) << err.message;
  JsonRef a = doc.root().first();
  EXPECT_EQ(a.as_string(), "a\"b\\c/\n\t");
  EXPECT_EQ(a.next().as_string(), "\xc3\xa9\xe2\x82\xac");
  EXPECT_EQ(a.next().next().as_string(), "\xf0\x9f\x98\x80");
}

TEST(ReportJson, RejectsBadTextWithItsColumn) {
  JsonDoc doc;
  JsonError err;
  EXPECT_FALSE(doc.parse(R"({"a": 1 "b": 2})", &err));
  EXPECT_EQ(err.column, 9u);
  EXPECT_NE(err.message.find("expected ','"), std::string::npos);
  for (const char* bad : {"", "{", "{\"a\"}", "[1,]", "{\"a\":01}", "tru", "\"unclosed", "{\"a\":1}x", "[1.]",
                          "\"tab\there\"", "{\"a\":-}", "{'a':1}"}) {
    EXPECT_FALSE(doc.parse(bad, &err)) << bad;
  }
  EXPECT_FALSE(doc.root().valid());  // a failed parse leaves nothing behind
}

TEST(ReportJson, RefusesDeepNestingInsteadOfOverflowingTheStack) {
  JsonDoc doc;
  JsonError err;
  std::string deep(100000, '[');
  EXPECT_FALSE(doc.parse(deep, &err));
  EXPECT_NE(err.message.find("nested"), std::string::npos);
}

TEST(ReportJson, ReusesOneDocumentForManyLines) {
  JsonDoc doc;
  JsonError err;
  ASSERT_TRUE(doc.parse(R"({"name": "first", "n": 1})", &err));
  ASSERT_TRUE(doc.parse(R"({"n": 2, "name": "second"})", &err));
  EXPECT_EQ(doc.root().get("name").as_string(), "second");
  EXPECT_EQ(doc.root().get("n").as_int(), 2);
}

// ---- wall clock ----

TEST(ReportAlign, ParsesWallTimes) {
  int64_t ns = 0;
  ASSERT_TRUE(parse_wall_time("1970-01-01T00:00:00Z", &ns));
  EXPECT_EQ(ns, 0);
  ASSERT_TRUE(parse_wall_time("2026-11-21T20:30:00Z", &ns));
  EXPECT_EQ(ns, 1795293000LL * 1000000000);
  ASSERT_TRUE(parse_wall_time("2026-11-21T20:30:00.25Z", &ns));
  EXPECT_EQ(ns, 1795293000LL * 1000000000 + 250000000);
  ASSERT_TRUE(parse_wall_time("2026-11-21T21:30:00+01:00", &ns));
  EXPECT_EQ(ns, 1795293000LL * 1000000000);
  EXPECT_FALSE(parse_wall_time("2026-11-21T20:30:00", &ns));  // no zone
  EXPECT_FALSE(parse_wall_time("yesterday", &ns));
  EXPECT_FALSE(parse_wall_time("2026-13-01T00:00:00Z", &ns));
}

TEST(ReportAlign, SameHostByMonotonicClockOtherHostsByWallClock) {
  TraceSet set;
  auto add = [&](const char* host, int64_t t0, const char* wall) {
    set.files.emplace_back();
    TraceFile& f = set.files.back();
    f.host = host;
    f.t0_ns = t0;
    f.wall_t0 = wall;
    f.kernels.push_back({100, 200, 0, 0, 0, 0, {0, 0, 0}, {0, 0, 0}});
  };
  add("a", 5000, "2026-11-21T20:30:00Z");
  add("a", 7000, "2026-11-21T20:29:00Z");  // same host: its (wrong) wall clock is not used
  add("b", 1, "2026-11-21T20:30:01Z");     // another host: one second after host a's first file
  align_files(set);
  EXPECT_EQ(set.files[0].offset_ns, 0);
  EXPECT_EQ(set.files[1].offset_ns, 2000);
  EXPECT_EQ(set.files[2].offset_ns, 1000000000);
  EXPECT_EQ(set.files[1].kernels[0].t, 2100);
  EXPECT_EQ(set.span_ns, 1000000200);
}

// ---- reader ----

class ReportReader : public ::testing::Test {
 protected:
  // Names of their own per process: the sanitizer build may run these tests at the same time.
  std::string write(const std::string& name, const std::string& text) {
    std::string path = ::testing::TempDir() + "/gms_report_" + std::to_string(getpid()) + "_" + name;
    files_.push_back(path);
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  void TearDown() override {
    for (const std::string& f : files_) std::remove(f.c_str());
  }
  std::vector<std::string> files_;
  static constexpr const char* kHeader =
      R"({"type": "header", "format": "gpumemshim-trace", "version": 1, "host": "h", "pid": 1, "t0_ns": 0})";
};

TEST_F(ReportReader, ReadsEventsAndCountsWhatItDoesNotKnow) {
  std::string path = write("ok.jsonl", std::string(kHeader) + "\n" +
                                           R"({"type": "alloc", "t": 5, "ptr": "0x1000", "bytes": 4096, "api": "cuMemAllocManaged", "kind": "managed", "site": 3, "color": "blue"})"
                                           "\n"
                                           R"({"type": "hologram", "t": 6})"
                                           "\n\n"
                                           R"({"type": "end", "events": 2, "dropped": 0})"
                                           "\n");
  TraceSet set;
  std::string error;
  ASSERT_TRUE(read_trace_file(path, set, &error)) << error;
  const TraceFile& f = set.files[0];
  ASSERT_EQ(f.allocs.size(), 1u);
  EXPECT_EQ(f.allocs[0].ptr, 0x1000u);
  EXPECT_EQ(set.strings.str(f.allocs[0].site), "3");
  EXPECT_EQ(f.unknown_keys, 1);
  EXPECT_EQ(f.unknown_types.at("hologram"), 1);
  EXPECT_TRUE(f.ended);
  EXPECT_TRUE(set.warnings.empty());
}

// Values no driver can make (a GPU fault record counting 10^18 faults, a migration of 2^50 bytes)
// are left out of every count and said once per file, with the first one's line.
TEST_F(ReportReader, ImpossibleUnifiedMemoryRecordsAreLeftOutAndSaid) {
  std::string path = write("um.jsonl", std::string(kHeader) + "\n" +
                                           R"({"type": "um", "t": 1, "end": 2, "counter": "gpu_fault", "address": "0x1000", "bytes": 0, "value": 907452736313848329})"
                                           "\n"
                                           R"({"type": "um", "t": 3, "end": 4, "counter": "htod", "address": "0x1000", "bytes": 1125899906842624, "value": 0})"
                                           "\n"
                                           R"({"type": "um", "t": 5, "end": 6, "counter": "htod", "address": "0x1000", "bytes": 2097152, "value": 2097152})"
                                           "\n"
                                           R"({"type": "um", "t": 7, "end": 8, "counter": "gpu_fault", "address": "0x1000", "bytes": 0, "value": 3})"
                                           "\n"
                                           R"({"type": "end", "events": 4, "dropped": 0})"
                                           "\n");
  TraceSet set;
  std::string error;
  ASSERT_TRUE(read_trace_file(path, set, &error)) << error;
  const TraceFile& f = set.files[0];
  ASSERT_EQ(f.um.size(), 2u);
  EXPECT_EQ(f.um[0].bytes, 2097152u);
  EXPECT_EQ(f.um[1].value, 3);
  EXPECT_EQ(f.um_impossible, 2);
  ASSERT_EQ(set.warnings.size(), 1u);
  EXPECT_NE(set.warnings[0].find("2 unified-memory records with impossible values"), std::string::npos) << set.warnings[0];
  EXPECT_NE(set.warnings[0].find("line 2: a gpu_fault record with value 907452736313848329"), std::string::npos)
      << set.warnings[0];
  Report r = analyze(set, {});
  EXPECT_EQ(r.totals.um.gpu_faults, 3);
  EXPECT_EQ(r.totals.um.htod, 2097152u);
}

TEST_F(ReportReader, NamesTheFileAndLineOfBadJson) {
  std::string path = write("bad.jsonl", std::string(kHeader) + "\n{\"type\": \"um\", \"t\": 1,}\n{\"type\": \"end\"}\n");
  TraceSet set;
  std::string error;
  EXPECT_FALSE(read_trace_file(path, set, &error));
  EXPECT_NE(error.find("bad.jsonl:2: not valid JSON"), std::string::npos) << error;
}

TEST_F(ReportReader, RefusesWrongTypesOfKnownKeys) {
  std::string path = write("types.jsonl", std::string(kHeader) + "\n{\"type\": \"copy\", \"t\": 1, \"bytes\": \"many\"}\n");
  TraceSet set;
  std::string error;
  EXPECT_FALSE(read_trace_file(path, set, &error));
  EXPECT_NE(error.find("types.jsonl:2: \"bytes\" must be an integer"), std::string::npos) << error;
  path = write("addr.jsonl", std::string(kHeader) + "\n{\"type\": \"free\", \"t\": 1, \"ptr\": \"12ab\"}\n");
  EXPECT_FALSE(read_trace_file(path, set, &error));
  EXPECT_NE(error.find("addr.jsonl:2: \"ptr\" must be an address"), std::string::npos) << error;
  path = write("t.jsonl", std::string(kHeader) + "\n{\"type\": \"kernel\", \"name\": \"k\"}\n");
  EXPECT_FALSE(read_trace_file(path, set, &error));
  EXPECT_NE(error.find("t.jsonl:2: a \"kernel\" line needs \"t\""), std::string::npos) << error;
}

TEST_F(ReportReader, RefusesWhatIsNotATrace) {
  TraceSet set;
  std::string error;
  EXPECT_FALSE(read_trace_file(write("empty.jsonl", ""), set, &error));
  EXPECT_NE(error.find("empty file"), std::string::npos) << error;
  EXPECT_FALSE(read_trace_file(write("csv.jsonl", "a,b,c\n1,2,3\n"), set, &error));
  EXPECT_NE(error.find("csv.jsonl:1: not a gpumemshim trace"), std::string::npos) << error;
  EXPECT_FALSE(read_trace_file(write("v2.jsonl", R"({"type": "header", "format": "gpumemshim-trace", "version": 2})"
                                                 "\n"),
                               set, &error));
  EXPECT_NE(error.find("version 2 is newer than this gpumemshim reads (version 1)"), std::string::npos) << error;
  EXPECT_FALSE(read_trace_file(write("two.jsonl", std::string(kHeader) + "\n" + kHeader + "\n"), set, &error));
  EXPECT_NE(error.find("two.jsonl:2: a second header"), std::string::npos) << error;
  EXPECT_FALSE(read_trace_file(::testing::TempDir() + "/no-such-file.jsonl", set, &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

TEST_F(ReportReader, ACutShortTraceIsReportedNotRefused) {
  std::string path = write("cut.jsonl", std::string(kHeader) + "\n" + R"({"type": "free", "t": 1, "ptr": "0x10"})" +
                                            "\n" + R"({"type": "um", "t": 2, "cou)");
  TraceSet set;
  std::string error;
  ASSERT_TRUE(read_trace_file(path, set, &error)) << error;
  EXPECT_FALSE(set.files[0].ended);
  EXPECT_EQ(set.files[0].frees.size(), 1u);
  ASSERT_EQ(set.warnings.size(), 2u);
  EXPECT_NE(set.warnings[0].find("cut.jsonl:3: the last line is cut off"), std::string::npos);
  EXPECT_NE(set.warnings[1].find("trace ends early (the program was killed?)"), std::string::npos);
}

// ---- attribution ----

class ReportAnalyze : public ::testing::Test {
 protected:
  ReportAnalyze() {
    set.files.emplace_back();
    set.files[0].path = "x";
  }
  TraceFile& f() { return set.files[0]; }
  uint32_t s(const char* text) { return set.strings.intern(text); }
  void um(int64_t t, int64_t end, const char* counter, uint64_t address, uint64_t bytes, const char* cause = "",
          int64_t value = 0, int32_t device = 0) {
    f().um.push_back({t, end, address, bytes, value, s(counter), s(cause), 0, device});
  }
  TraceSet set;
};

TEST_F(ReportAnalyze, ACpuFaultRecordIsOneFaultWhateverItsValue) {
  // CUPTI's value for a CPU fault is the faulting instruction's address; for a GPU fault, the
  // number of faults in the group.
  f().allocs.push_back({0, 0x1000, 0x1000, s("cuMemAllocManaged"), s("managed"), 0, 0, 0});
  um(10, 10, "cpu_fault", 0x1000, 0, "", 0x55d4c0004000);
  um(20, 20, "cpu_fault", 0x1800, 0, "", 0x7f0012345678);
  um(30, 31, "gpu_fault", 0x1000, 0, "", 5);
  Report r = analyze(set, {});
  ASSERT_EQ(r.regions.size(), 1u);
  EXPECT_EQ(r.regions[0].um.cpu_faults, 2);
  EXPECT_EQ(r.regions[0].um.gpu_faults, 5);
  EXPECT_EQ(r.totals.um.cpu_faults, 2);
}

// The CPU's turns seen from its fault records alone (no migration record to the host, as CUPTI gave
// on the H200): CPU writes, a kernel pulls it in, three times over.
TEST_F(ReportAnalyze, CpuFaultsBetweenMigrationsToTheGpuAreTurnsToo) {
  f().allocs.push_back({0, 0x10000, 0x10000, s("cuMemAllocManaged"), s("managed"), 0, 0, 0});
  int64_t t = 100;
  for (int round = 0; round < 3; ++round) {
    um(t, t, "cpu_fault", 0x10000, 0, "", 0x401000);
    um(t + 10, t + 10, "cpu_fault", 0x18000, 0, "", 0x401000);
    um(t + 100, t + 1000, "htod", 0x10000, 1 << 16, "coherence");
    f().kernels.push_back({t + 50, t + 1500, s("_Z7add_onePfm"), 0, 7, round, {1, 1, 1}, {1, 1, 1}});
    t += 2000;
  }
  Report r = analyze(set, {});
  ASSERT_EQ(r.regions.size(), 1u);
  EXPECT_EQ(r.regions[0].um.turns, 5);
  EXPECT_EQ(r.regions[0].um.cpu_faults, 6);
  auto pp = std::find_if(r.offenders.begin(), r.offenders.end(), [](const Offender& o) { return o.kind == "ping_pong"; });
  ASSERT_NE(pp, r.offenders.end());
  EXPECT_EQ(pp->count, 3);
  // Who moved it: the kernel it came in during, and the CPU's faulting instruction.
  EXPECT_NE(pp->hint.find("in during add_one(float*, unsigned long), back on 6 CPU faults at instruction 0x401000"), std::string::npos) << pp->hint;
}

TEST_F(ReportAnalyze, ARegionThatGoesToTheGpuAndBackIsNamedPingPong) {
  f().allocs.push_back({0, 0x10000, 0x10000, s("cuMemAllocManaged"), s("managed"), 0, 0, 0});
  f().allocs.push_back({0, 0x40000, 0x10000, s("cuMemAllocManaged"), s("managed"), 0, 0, 0});
  // The first: three rounds, each way in one or two records. The second: there and back once.
  const char* ways[] = {"htod", "htod", "dtoh", "dtoh", "htod", "dtoh", "htod", "dtoh"};
  int64_t t = 100;
  for (const char* w : ways) {
    um(t, t + 1000, w, 0x10000, 1 << 20, "coherence");
    t += 2000;
  }
  um(t, t + 1000, "htod", 0x40000, 1 << 20, "coherence");
  um(t + 2000, t + 3000, "dtoh", 0x40000, 1 << 20, "coherence");
  Report r = analyze(set, {});
  const Offender* pp = nullptr;
  int found = 0;
  for (const Offender& o : r.offenders) {
    if (o.kind == "ping_pong") pp = &o, ++found;
  }
  ASSERT_EQ(found, 1) << "only the region that went back and forth more than once";
  EXPECT_EQ(pp->count, 3);
  EXPECT_EQ(pp->bytes, 8u << 20);
  EXPECT_EQ(pp->lost_ns, 8000);
  EXPECT_NE(pp->subject.find("0x10000"), std::string::npos) << pp->subject;
  EXPECT_NE(pp->hint.find("3 times"), std::string::npos) << pp->hint;
}

TEST_F(ReportAnalyze, RecordsGoToTheRegionLiveAtTheirTime) {
  // Two regions at the same address, one after the other, and a record outside both.
  f().allocs.push_back({0, 0x1000, 0x1000, s("cuMemAllocManaged"), s("managed"), 0, 0, 0});
  f().frees.push_back({100, 0x1000, 0x1000, 0});
  f().allocs.push_back({100, 0x1000, 0x2000, s("cuMemAllocManaged"), s("managed"), 0, 0, 0});
  um(50, 60, "htod", 0x1800, 4096, "coherence");
  um(150, 170, "htod", 0x2800, 8192, "coherence");  // only inside the second, larger region
  um(160, 161, "gpu_fault", 0x1000, 0, "", 7);
  um(170, 171, "gpu_fault", 0x9000, 0, "", 3);
  Report r = analyze(set, {});
  ASSERT_EQ(r.regions.size(), 2u);
  EXPECT_EQ(r.regions_total, 2);
  // Busiest first: the second region moved more.
  EXPECT_EQ(r.regions[0].bytes, 0x2000u);
  EXPECT_EQ(r.regions[0].um.htod, 8192u);
  EXPECT_EQ(r.regions[0].um.gpu_faults, 7);
  EXPECT_EQ(r.regions[0].free_t, -1);
  EXPECT_EQ(r.regions[1].um.htod, 4096u);
  EXPECT_EQ(r.regions[1].free_t, 100);
  EXPECT_EQ(r.unattributed.gpu_faults, 3);
  EXPECT_EQ(r.totals.um.gpu_faults, 10);
  EXPECT_EQ(r.totals.migrated_by_cause.at("coherence"), 4096u + 8192u);
  EXPECT_FALSE(r.by_site);
  ASSERT_EQ(r.sites.size(), 1u);
  EXPECT_EQ(r.sites[0].key, "cuMemAllocManaged");
  EXPECT_EQ(r.sites[0].allocations, 2);
}

TEST_F(ReportAnalyze, KernelsGetTheRecordsOfTheirDeviceAndTime) {
  f().kernels.push_back({100, 200, s("k1"), 0, 7, 1, {1, 1, 1}, {1, 1, 1}});
  f().kernels.push_back({300, 400, s("k1"), 0, 7, 2, {1, 1, 1}, {1, 1, 1}});
  f().kernels.push_back({100, 400, s("other_gpu"), 1, 7, 3, {1, 1, 1}, {1, 1, 1}});
  um(150, 160, "htod", 0x10, 1000, "coherence");
  um(200, 210, "htod", 0x10, 500, "coherence");  // at the end of k1: [t, end) excludes it
  um(350, 360, "htod", 0x10, 2000, "user_prefetch");
  Report r = analyze(set, {});
  ASSERT_EQ(r.kernels.size(), 2u);
  const KernelRow& k1 = r.kernels[0].name == "k1" ? r.kernels[0] : r.kernels[1];
  const KernelRow& other = r.kernels[0].name == "k1" ? r.kernels[1] : r.kernels[0];
  EXPECT_EQ(k1.launches, 2);
  EXPECT_EQ(k1.time_ns, 200);
  EXPECT_EQ(k1.um.htod, 3000u);
  EXPECT_EQ(k1.um.fault_htod, 1000u);
  EXPECT_EQ(k1.fault_time_ns, 100);  // only the launch that migrated on faults
  EXPECT_EQ(other.um.htod, 0u);
}

TEST_F(ReportAnalyze, NestedRangesEachCountWhatHappenedInside) {
  f().ranges.push_back({0, 1000, s("step"), s("train"), 1});
  f().ranges.push_back({100, 200, s("forward"), s("train"), 1});
  um(150, 160, "gpu_fault", 0x10, 0, "", 4);
  um(500, 510, "dtoh", 0x10, 64, "coherence");
  f().copies.push_back({120, 10, 4096, s("cuMemcpyHtoD_v2"), s("htod"), s("pageable"), s("driver"), 0});
  Report r = analyze(set, {});
  ASSERT_EQ(r.ranges.size(), 2u);
  EXPECT_EQ(r.ranges[0].name, "step");
  EXPECT_EQ(r.ranges[0].um.gpu_faults, 4);
  EXPECT_EQ(r.ranges[0].um.dtoh, 64u);
  EXPECT_EQ(r.ranges[0].copies.bytes, 4096u);
  EXPECT_EQ(r.ranges[1].name, "forward");
  EXPECT_EQ(r.ranges[1].um.gpu_faults, 4);
  EXPECT_EQ(r.ranges[1].um.dtoh, 0u);
  EXPECT_EQ(r.ranges[1].copies.count, 1);
}

TEST_F(ReportAnalyze, PageableCopiesBecomeAnOffenderWithAHint) {
  uint32_t site = s("1");
  f().sites[site] = {{"/usr/local/cuda/lib64/libcudart.so.13", "0x10", "cudaMemcpy"},
                     {"/home/a/app", "0x20", "load_batch(float*)"}};
  // 1 GB in 100 ms: 10 GB/s, against 55 GB/s pinned on PCIe gen5 x16.
  f().devices.push_back({0, "H100", 0, 0, 5, 16});
  f().copies.push_back({0, 100000000, 1000000000, s("cuMemcpyHtoD_v2"), s("htod"), s("pageable"), s("driver"), site});
  Report r = analyze(set, {});
  ASSERT_TRUE(r.by_site);
  EXPECT_EQ(r.sites[0].key, "load_batch(float*)");  // the CUDA runtime's frame is skipped
  ASSERT_EQ(r.offenders.size(), 1u);
  const Offender& o = r.offenders[0];
  EXPECT_EQ(o.kind, "pageable_copies");
  EXPECT_EQ(o.lost_ns, 100000000 - static_cast<int64_t>(1e9 / 55.0));
  EXPECT_EQ(o.hint,
            "pageable copies from load_batch(float*): 1.0 GB at 10.0 GB/s; pinned would be about 55 GB/s (pin the "
            "buffer or run with the shim's registration)");
  EXPECT_EQ(r.copies.source, "copy");
  ASSERT_EQ(r.copies.kinds.size(), 1u);
  EXPECT_EQ(r.copies.kinds[0].kind, "htod pageable");
  EXPECT_DOUBLE_EQ(r.copies.kinds[0].gbps, 10.0);
}

TEST(ReportLink, PeakFollowsTheHeadersLink) {
  TraceSet set;
  set.files.emplace_back();
  EXPECT_TRUE(find_link_peak(set).assumed);
  EXPECT_DOUBLE_EQ(find_link_peak(set).practical_gbps, 55.0);
  set.files[0].devices.push_back({0, "A100", 0, 0, 4, 16});
  LinkPeak l = find_link_peak(set);
  EXPECT_FALSE(l.assumed);
  EXPECT_DOUBLE_EQ(l.theoretical_gbps, 32.0);
  EXPECT_DOUBLE_EQ(l.practical_gbps, 32.0 * 55 / 64);
  set.files[0].devices[0].pcie_gen = 3;
  EXPECT_DOUBLE_EQ(find_link_peak(set).theoretical_gbps, 16.0);
}

TEST(ReportSweep, EventsCountForEveryOpenSpan) {
  std::vector<Span> spans = {{0, 10, 0}, {2, 5, 1}, {20, 30, 2}};
  std::vector<std::pair<int64_t, uint32_t>> times = {{1, 0}, {3, 1}, {5, 2}, {25, 3}, {30, 4}};
  std::vector<std::pair<uint32_t, uint32_t>> seen;
  for_each_inside(spans, times, [&](uint32_t span, uint32_t event) { seen.push_back({span, event}); });
  std::vector<std::pair<uint32_t, uint32_t>> want = {{0, 0}, {0, 1}, {1, 1}, {0, 2}, {2, 3}};
  EXPECT_EQ(seen, want);
}

TEST(ReportUnits, HumanNumbers) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(999), "999 B");
  EXPECT_EQ(human_bytes(40000000), "40.0 MB");
  EXPECT_EQ(human_bytes(12000000000ULL), "12.0 GB");
  EXPECT_EQ(human_bytes(999960000ULL), "1.0 GB");
  EXPECT_EQ(human_duration(850), "850 ns");
  EXPECT_EQ(human_duration(12345), "12.3 us");
  EXPECT_EQ(human_duration(1234567890), "1.23 s");
  EXPECT_EQ(human_rate(9100000000ULL, 1000000000), "9.1 GB/s");
  EXPECT_EQ(human_rate(1, 0), "-");
  EXPECT_EQ(human_count(1234567), "1,234,567");
  EXPECT_EQ(hex_address(0x7f00deadbeefULL), "0x7f00deadbeef");
  EXPECT_EQ(ellipsize("abcdefghij", 6), "abc...");
  EXPECT_EQ(site_label({{"/lib/libgpumemshim.so", "0x1", "hook"}, {"/bin/app", "0x2a", ""}}), "app+0x2a");
  EXPECT_EQ(site_label({{"/bin/app", "0x2a", ""}, {"/bin/app", "0x30", "site_a"}, {"/bin/app", "0x9", "main"}}),
            "site_a [app+0x2a]");
  EXPECT_EQ(site_label({{"/usr/lib/libcuda.so.1", "0x5", "cuMemAlloc_v2"}}), "cuMemAlloc_v2");
  EXPECT_EQ(site_label({}), "");
}

}  // namespace
}  // namespace gms::report
