// `gpumemshim report TRACE... [--json] [--perfetto OUT.json] [--html OUT.html] [--top N] [--force]`
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.h"
#include "core/options.h"
#include "core/out_file.h"
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
      "Usage: gpumemshim report TRACE... [--json] [--perfetto OUT.json] [--html OUT.html] [--top N] [--force]\n\n"
      "Reads the traces the shim wrote (GPUMEMSHIM_TRACE=path; format: shim/trace/FORMAT.md) and reports\n"
      "where memory moved and why: totals, per allocation site (or per API), per region, per kernel, per\n"
      "NVTX range, explicit copies against the link's peak, host registration, the shim's placement\n"
      "decisions, and the top offenders with a hint each. Several files (the ranks of one job) merge into\n"
      "one view, aligned in time by their headers; '-' reads standard input, and a file given twice is\n"
      "read once.\n\n"
      "  --json             print the report as one JSON document instead of text (keys: tools/report/README.md)\n"
      "  --perfetto FILE    also write a timeline for ui.perfetto.dev or chrome://tracing\n"
      "  --html FILE        also write one self-contained HTML page with plots and the tables\n"
      "  --force            write an output even over an existing trace (refused otherwise)\n"
      "  --top N            how many offenders to list (default 5)\n"
      "  --timeline FILE    also write the first trace's repeating step as a step timeline (policy/timeline.h)\n"
      "  --budget SIZE      the device budget the repeating step's floor and schedule are for (default: the\n"
      "                     trace's own; e.g. 8G, to ask what a run without a budget would cost under one)\n"
      "  -h, --help         this help\n\n"
      "Exit status: 0 on success, 2 for bad arguments, an output that would overwrite a trace, or a trace\n"
      "that cannot be read (the message names the file and line), 1 when an output file cannot be written.\n");
}

int usage(const std::string& message) {
  std::fprintf(stderr, "gpumemshim report: %s\nTry 'gpumemshim report --help'.\n", message.c_str());
  return kExitUsage;
}

// The identity of an existing file, to recognise the same file under two names.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileId&) const = default;
};
std::optional<FileId> file_id(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

// Whether an existing file starts like a trace the shim wrote.
bool looks_like_trace(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char head[256];
  size_t n = std::fread(head, 1, sizeof(head), f);
  std::fclose(f);
  return std::string_view(head, n).find("\"gpumemshim-trace\"") != std::string_view::npos;
}

// 0, or the exit status for an output that would destroy a trace (an input of this report, or any
// other trace: the README's `report run-*.jsonl` after `--html` takes the first trace as the page's
// name) or that cannot be written at all (a symlink, a device...).
int check_output(const std::string& flag, const std::string& path, const std::vector<FileId>& inputs, bool force,
                 std::string* message) {
  std::optional<FileId> id = file_id(path);
  if (id && !force) {
    bool input = std::find(inputs.begin(), inputs.end(), *id) != inputs.end();
    if (input || looks_like_trace(path)) {
      *message = flag + " " + path + " would overwrite " + (input ? "a trace this report reads" : "a trace") +
                 ": name another file (or add --force)";
      return kExitUsage;
    }
  }
  OutFileError e;
  if (!out_file_check(path.c_str(), &e)) {
    *message = "cannot write " + path + " (" + e.what + (e.err ? std::string(": ") + std::strerror(e.err) : "") + ")";
    return kExitCannotWrite;
  }
  return 0;
}

// Writes one output file through `write` (made by core/out_file: never through a symlink, never over
// a device or another user's file); says why on failure.
template <class Write>
bool write_file(const std::string& path, const char* what, Write write) {
  OutFile out;
  OutFileError e;
  bool ok = out_file_create(path.c_str(), 0666, &out, &e);
  if (ok) {
    std::FILE* f = fdopen(out.fd, "wb");
    if (!f) {
      e = {"cannot write the file", errno};
      out_file_discard(&out);
      ok = false;
    } else {
      bool written = write(f) && std::fflush(f) == 0 && !std::ferror(f);
      int err = errno;
      if (std::fclose(f) != 0 && written) err = errno, written = false;  // the descriptor is closed too
      out.fd = -1;
      if (!written) {
        e = {"cannot write the file", err};
        out_file_discard(&out);
        ok = false;
      } else {
        ok = out_file_publish(&out, &e);
      }
    }
  }
  if (!ok)
    std::fprintf(stderr, "gpumemshim report: cannot write the %s to %s (%s%s%s)\n", what, path.c_str(), e.what,
                 e.err ? ": " : "", e.err ? std::strerror(e.err) : "");
  return ok;
}

}  // namespace

int report_command(int argc, char** argv) {
  std::vector<std::string> traces;
  bool json = false, force = false;
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
    if (a == "--force") {
      force = true;
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

  // The same file under two names (or '-' twice) is read once: two copies would count as two processes.
  std::vector<std::string> unique;
  std::vector<FileId> ids;
  for (const std::string& path : traces) {
    std::optional<FileId> id = path == "-" ? std::nullopt : file_id(path);
    size_t seen = unique.size();
    for (size_t j = 0; j < unique.size(); ++j) {
      bool same = path == "-" ? unique[j] == "-" : (id && unique[j] != "-" && ids[j] == *id);
      if (same) seen = j;
    }
    if (seen < unique.size()) {
      std::fprintf(stderr, "gpumemshim report: note: %s is the same file as %s: read once\n",
                   report::terminal_safe(path).c_str(), report::terminal_safe(unique[seen]).c_str());
      continue;
    }
    unique.push_back(path);
    ids.push_back(id.value_or(FileId{}));
  }
  std::vector<FileId> input_ids;
  for (size_t j = 0; j < unique.size(); ++j)
    if (unique[j] != "-" && file_id(unique[j])) input_ids.push_back(ids[j]);
  for (const auto& [flag, path] : {std::pair{"--perfetto", perfetto_path}, std::pair{"--html", html_path},
                                   std::pair{"--timeline", timeline_path}}) {
    std::string refusal;
    int status = path.empty() ? 0 : check_output(flag, path, input_ids, force, &refusal);
    if (status != 0) {
      std::fprintf(stderr, "gpumemshim report: %s\n", report::terminal_safe(refusal).c_str());
      return status;
    }
  }

  report::TraceSet set;
  for (const std::string& path : unique) {
    std::string error;
    if (!report::read_trace_file(path, set, &error)) {
      std::fprintf(stderr, "gpumemshim report: %s\n", report::terminal_safe(error).c_str());
      return kExitUsage;
    }
  }
  report::align_files(set);
  for (const std::string& w : set.warnings)
    std::fprintf(stderr, "gpumemshim report: warning: %s\n", report::terminal_safe(w).c_str());

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
    ok &= std::fwrite(text.data(), 1, text.size(), stdout) == text.size();
  }
  if (std::fflush(stdout) != 0) ok = false;
  return ok ? 0 : kExitCannotWrite;
}

}  // namespace gms::tools
