// `gpumemshim report TRACE... [--json] [--perfetto OUT.json] [--html OUT.html] [--top N]`
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "core/options.h"
#include "report/align.h"
#include "report/model.h"
#include "report/steps.h"
#include "report/render.h"
#include "report/tables.h"
#include "report/trace_reader.h"

namespace gms::tools {
namespace {

constexpr int kExitCannotWrite = 1;
constexpr size_t kTextRows = 10;  // rows of the long tables in the terminal report
constexpr size_t kHtmlRows = 50;

void print_report_help() {
  std::printf(
      "Usage: gpumemshim report TRACE... [--json] [--perfetto OUT.json] [--html OUT.html] [--top N]\n\n"
      "Reads the traces the shim wrote (GPUMEMSHIM_TRACE=path; format: shim/trace/FORMAT.md) and reports\n"
      "where memory moved and why: totals, per allocation site (or per API), per region, per kernel, per\n"
      "NVTX range, explicit copies against the link's peak, host registration, the shim's placement\n"
      "decisions, and the top offenders with a hint each. Several files (the ranks of one job) merge into\n"
      "one view, aligned in time by their headers.\n\n"
      "  --json             print the report as one JSON document instead of text (keys: tools/report/README.md)\n"
      "  --perfetto FILE    also write a timeline for ui.perfetto.dev or chrome://tracing\n"
      "  --html FILE        also write one self-contained HTML page with plots and the tables\n"
      "  --top N            how many offenders to list (default 5)\n"
      "  --timeline FILE    also write the first trace's repeating step as a step timeline (policy/timeline.h)\n"
      "  --budget SIZE      the device budget the repeating step's floor and schedule are for (default: the\n"
      "                     trace's own; e.g. 8G, to ask what a run without a budget would cost under one)\n"
      "  -h, --help         this help\n\n"
      "Exit status: 0 on success, 2 for bad arguments or a trace that cannot be read (the message names\n"
      "the file and line), 1 when an output file cannot be written.\n");
}

int usage(const std::string& message) {
  std::fprintf(stderr, "gpumemshim report: %s\nTry 'gpumemshim report --help'.\n", message.c_str());
  return kExitUsage;
}

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

// Writes one output file through `write`; says why on failure.
template <class Write>
bool write_file(const std::string& path, const char* what, Write write) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  bool ok = f && write(f.get());
  if (f && std::fclose(f.release()) != 0) ok = false;
  if (!ok) std::fprintf(stderr, "gpumemshim report: cannot write the %s to %s: %s\n", what, path.c_str(), std::strerror(errno));
  return ok;
}

}  // namespace

int report_command(int argc, char** argv) {
  std::vector<std::string> traces;
  bool json = false;
  std::string perfetto_path, html_path, timeline_path;
  int top = 5;
  uint64_t budget = 0;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (options_done || a.empty() || a[0] != '-' || a == "-") {
      traces.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    if (a == "-h" || a == "--help") return print_report_help(), 0;
    if (a == "--json") {
      json = true;
      continue;
    }
    // --name VALUE or --name=VALUE
    std::string name = a, value;
    bool has_value = false;
    if (size_t eq = a.find('='); eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    if (name != "--perfetto" && name != "--html" && name != "--top" && name != "--timeline" && name != "--budget") {
      return usage("unknown option '" + a + "'");
    }
    if (!has_value) {
      if (i + 1 >= argc) return usage(name + " needs a value");
      value = argv[++i];
    }
    if (name == "--perfetto") {
      perfetto_path = value;
    } else if (name == "--html") {
      html_path = value;
    } else if (name == "--timeline") {
      timeline_path = value;
    } else if (name == "--budget") {
      if (!parse_size(value.c_str(), &budget) || budget == 0) {
        return usage("--budget needs a size in bytes, with K, M, G or T if wanted (e.g. 8G), not '" + value + "'");
      }
    } else {
      char* end = nullptr;
      errno = 0;
      long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end || errno || n < 0 || n > 1000000)
        return usage("--top needs a whole number of offenders (0 or more), not '" + value + "'");
      top = static_cast<int>(n);
    }
    if (value.empty()) return usage(name + " needs a file name");
  }
  if (traces.empty()) return usage("no trace file given");

  report::TraceSet set;
  for (const std::string& path : traces) {
    std::string error;
    if (!report::read_trace_file(path, set, &error)) {
      std::fprintf(stderr, "gpumemshim report: %s\n", error.c_str());
      return kExitUsage;
    }
  }
  report::align_files(set);
  for (const std::string& w : set.warnings) std::fprintf(stderr, "gpumemshim report: warning: %s\n", w.c_str());

  report::Report r = report::analyze(set, {top, budget});
  bool ok = true;
  if (!perfetto_path.empty())
    ok &= write_file(perfetto_path, "Perfetto timeline", [&](std::FILE* f) { return report::write_perfetto(set, f); });
  if (!html_path.empty()) {
    report::ReportView view = report::build_view(set, r, kHtmlRows);
    ok &= write_file(html_path, "HTML report", [&](std::FILE* f) { return report::write_html(set, r, view, f); });
  }
  if (!timeline_path.empty()) {
    policy::StepTimeline t;
    const report::StepRow row = report::find_step(set, 0, &t, budget);
    if (!row.missing.empty()) {
      std::fprintf(stderr, "gpumemshim report: no step timeline in %s: %s\n", set.files[0].path.c_str(), row.missing.c_str());
      ok = false;
    } else {
      const std::string text = t.format();
      ok &= write_file(timeline_path, "step timeline", [&](std::FILE* f) { return std::fputs(text.c_str(), f) >= 0; });
    }
  }
  if (json) {
    ok &= report::write_json(set, r, stdout);
  } else {
    std::string text = report::render_text(report::build_view(set, r, kTextRows));
    ok &= std::fputs(text.c_str(), stdout) >= 0;
  }
  if (std::fflush(stdout) != 0) ok = false;
  return ok ? 0 : kExitCannotWrite;
}

}  // namespace gms::tools
