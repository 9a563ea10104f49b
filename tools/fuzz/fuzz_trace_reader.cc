// libFuzzer target: any bytes as a trace file, through the reader, the analysis and every renderer.
// Besides the sanitizers' findings it checks what the report promises about hostile input: a
// rejected trace gets one line of error, and the text report carries no control character but
// its own line ends.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "report/align.h"
#include "report/model.h"
#include "report/render.h"
#include "report/tables.h"
#include "report/trace_reader.h"

namespace {

[[noreturn]] void broken(const char* what, const std::string& text) {
  std::fprintf(stderr, "fuzz_trace_reader: %s: %s\n", what, gms::report::terminal_safe(text).c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gms::report;
  std::FILE* in = size ? fmemopen(const_cast<uint8_t*>(data), size, "rb") : std::fopen("/dev/null", "rb");
  if (!in) return 0;
  TraceSet set;
  std::string error;
  bool ok = read_trace_stream(in, "fuzz.jsonl", set, &error);
  std::fclose(in);
  if (!ok) {
    if (error.empty() || error.find('\n') != std::string::npos) broken("an error that is not one line", error);
    return 0;
  }
  align_files(set);
  Report r = analyze(set, {5});
  std::string text = render_text(build_view(set, r, 10));
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n') || u == 0x7f) broken("a control character in the text report", text);
  }
  std::FILE* sink = std::fopen("/dev/null", "wb");
  if (!sink) return 0;
  write_json(set, r, sink);
  write_perfetto(set, sink);
  write_html(set, r, build_view(set, r, 50), sink);
  std::fclose(sink);
  return 0;
}
