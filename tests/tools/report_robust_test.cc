// Unit tests of what keeps `gpumemshim report` robust to any bytes (issue 28) and readable (issue
// 27): demangled, shortened kernel names; control characters escaped in the text report; totals
// that saturate; numbers out of range and overlong lines refused with one clear line.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "report/align.h"
#include "report/demangle.h"
#include "report/model.h"
#include "report/render.h"
#include "report/tables.h"
#include "report/trace_reader.h"

namespace gms::report {
namespace {

constexpr const char* kHeader =
    R"({"type": "header", "format": "gpumemshim-trace", "version": 1, "host": "h", "pid": 1, "t0_ns": 0})";

// Reads `text` as a trace from memory.
bool read(const std::string& text, TraceSet& set, std::string* error) {
  std::FILE* in = fmemopen(const_cast<char*>(text.data()), text.size(), "rb");
  bool ok = read_trace_stream(in, "t.jsonl", set, error);
  std::fclose(in);
  return ok;
}

std::string text_report(const std::string& trace) {
  TraceSet set;
  std::string error;
  EXPECT_TRUE(read(trace, set, &error)) << error;
  align_files(set);
  Report r = analyze(set, {5});
  return render_text(build_view(set, r, 10));
}

TEST(ReportNames, DemanglesCudaKernelNames) {
  EXPECT_EQ(demangle("_Z10vector_addPKfS0_Pfm"), "vector_add(float const*, float const*, float*, unsigned long)");
  EXPECT_EQ(demangle("ampere_sgemm_128x64_tn"), "ampere_sgemm_128x64_tn");  // not mangled: as is
  EXPECT_EQ(demangle("_Znot a name"), "_Znot a name");                      // not demangled: as is
  EXPECT_EQ(demangle(""), "");
}

TEST(ReportNames, ShortensToTheFunctionName) {
  const std::string fill =
      demangle("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_");
  ASSERT_EQ(fill.substr(0, 5), "void ");
  // Wide enough: only the return type goes.
  EXPECT_EQ(short_name(fill, 500), fill.substr(5));
  EXPECT_EQ(short_name(fill, 120),
            "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(...)");
  EXPECT_EQ(short_name(fill, 60), "at::native::vectorized_elementwise_kernel<...>(...)");
  EXPECT_EQ(short_name(fill, 48), "...vectorized_elementwise_kernel<...>(...)");
  EXPECT_EQ(short_name("vector_add(float const*, float const*, float*, unsigned long)", 48), "vector_add(...)");
  EXPECT_EQ(short_name("(anonymous namespace)::k(int)", 48), "(anonymous namespace)::k(int)");
  EXPECT_EQ(short_name("bool operator<(A, B)", 20), "operator<(A, B)");  // an unbalanced "<" breaks nothing
  EXPECT_LE(short_name(std::string(200, 'x'), 48).size(), 48u);
}

TEST(ReportText, KernelsShowDemangled) {
  std::string out = text_report(std::string(kHeader) + "\n" +
                                R"({"type": "kernel", "t": 1, "end": 5, "name": "_Z10vector_addPKfS0_Pfm", "device": 0})" "\n");
  EXPECT_NE(out.find("vector_add("), std::string::npos) << out;
  EXPECT_EQ(out.find("_Z10vector_add"), std::string::npos) << out;
}

TEST(ReportText, ControlCharactersAreEscaped) {
  EXPECT_EQ(terminal_safe(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(terminal_safe("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(terminal_safe("\xc2\x9b" "2J"), "\\u009b2J");  // C1 CSI
  EXPECT_EQ(terminal_safe("caf\xc3\xa9\x7f"), "caf\xc3\xa9\\x7f");
  std::string out = text_report(std::string(kHeader) + "\n" +
                                R"({"type": "kernel", "t": 1, "end": 5, "name": "k\u0000cut\u001b[2Jx\u009b", "device": 0})" "\n" +
                                R"({"type": "end", "events": 1, "dropped": 0})" "\n");
  for (char c : out) {
    auto u = static_cast<unsigned char>(c);
    EXPECT_FALSE((u < 0x20 && c != '\n') || u == 0x7f) << "raw control character " << int(u) << " in:\n" << out;
  }
  EXPECT_NE(out.find("k\\x00cut\\x1b[2Jx\\u009b"), std::string::npos) << out;
  EXPECT_NE(out.find("Top offenders"), std::string::npos) << "the report was cut short";
}

TEST(ReportTotals, SaturateInsteadOfWrapping) {
  // Three copies of INT64_MAX bytes (the report once said "9223.4 PB"), five of 2^61 ns.
  std::string trace = std::string(kHeader) + "\n";
  for (int i = 0; i < 5; ++i)
    trace += R"({"type": "copy", "t": 1, "api": "cuMemcpyHtoD_v2", "bytes": 9223372036854775807, "dir": "htod", "host_kind": "pageable", "path": "driver", "dur_ns": 2305843009213693952})" "\n";
  TraceSet set;
  std::string error;
  ASSERT_TRUE(read(trace, set, &error)) << error;
  align_files(set);
  Report r = analyze(set, {5});
  EXPECT_EQ(r.copies.all.bytes, UINT64_MAX);
  EXPECT_EQ(r.copies.all.ns, INT64_MAX);
  int64_t a = INT64_MAX;
  add_to(a, 1);
  EXPECT_EQ(a, INT64_MAX);
  add_to(a, INT64_MIN);
  EXPECT_EQ(a, -1);
  uint64_t u = 5;
  add_to(u, int64_t{-10});
  EXPECT_EQ(u, 0u);
  EXPECT_EQ(sat_diff(INT64_MIN, 1), INT64_MIN);
  EXPECT_EQ(sat_diff(INT64_MAX, -1), INT64_MAX);
}

TEST(ReportReaderLimits, OutOfRangeNumbersSaySo) {
  for (const char* bytes : {"1e26", "18446744073709551615", "-1e300"}) {
    TraceSet set;
    std::string error;
    std::string line = std::string(R"({"type": "alloc", "t": 1, "ptr": "0x10", "bytes": )") + bytes + "}\n";
    EXPECT_FALSE(read(std::string(kHeader) + "\n" + line, set, &error)) << bytes;
    EXPECT_NE(error.find("t.jsonl:2: \"bytes\" is out of range"), std::string::npos) << error;
  }
  TraceSet set;
  std::string error;
  EXPECT_FALSE(read(std::string(kHeader) + "\n" + R"({"type": "alloc", "t": 1, "bytes": 1.5})" "\n", set, &error));
  EXPECT_NE(error.find("\"bytes\" must be an integer"), std::string::npos) << error;
  // Whole numbers written with an exponent are integers.
  TraceSet ok;
  ASSERT_TRUE(read(std::string(kHeader) + "\n" + R"({"type": "alloc", "t": 1, "bytes": 4e3})" "\n", ok, &error)) << error;
  EXPECT_EQ(ok.files[0].allocs[0].bytes, 4000u);
  TraceSet late;
  EXPECT_FALSE(read(std::string(kHeader) + "\n" + R"({"type": "kernel", "t": 4611686018427387904})" "\n", late, &error));
  EXPECT_NE(error.find("\"t\" is out of range"), std::string::npos) << error;
  TraceSet slow;
  EXPECT_FALSE(read(std::string(kHeader) + "\n" + R"({"type": "copy", "t": 1, "dur_ns": 9223372036854775807})" "\n", slow, &error));
  EXPECT_NE(error.find("\"dur_ns\" is out of range"), std::string::npos) << error;
}

TEST(ReportReaderLimits, AnOverlongLineIsRefused) {
  std::string trace = std::string(kHeader) + "\n{\"type\": \"kernel\", \"name\": \"" +
                      std::string(kMaxTraceLine, 'k') + "\"}\n";
  TraceSet set;
  std::string error;
  EXPECT_FALSE(read(trace, set, &error));
  EXPECT_EQ(error, "t.jsonl:2: a line longer than 4 MiB: not a gpumemshim trace line");
  // Just within the limit is fine.
  std::string line = "{\"type\": \"x\", \"pad\": \"\"}";
  line.insert(line.size() - 2, kMaxTraceLine - line.size() - 1, 'p');
  TraceSet fits;
  EXPECT_TRUE(read(std::string(kHeader) + "\n" + line + "\n", fits, &error)) << error;
}

}  // namespace
}  // namespace gms::report
