#include "run_summary.h"

#include <glob.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

namespace gms::tools {
namespace {

// The trace's own count from its `end` line; without one (the program was cut short), the lines
// after the header.
TraceFile read_trace(const std::string& path) {
  TraceFile f;
  f.path = path;
  std::ifstream in(path);
  std::string line, last;
  uint64_t lines = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++lines;
    last = line;
  }
  const std::string key = "\"events\":";
  size_t at = last.find(key);
  if (last.rfind("{\"type\":\"end\"", 0) == 0 && at != std::string::npos) {
    f.complete = true;
    f.events = std::strtoull(last.c_str() + at + key.size(), nullptr, 10);
  } else {
    f.events = lines > 0 ? lines - 1 : 0;
  }
  return f;
}

}  // namespace

std::vector<TraceFile> find_trace_files(const std::string& pattern, double since) {
  std::string wildcard;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[++i];
      wildcard += c == '%' ? "%" : "*";
    } else if (pattern[i] == '*' || pattern[i] == '?' || pattern[i] == '[' || pattern[i] == '\\') {
      wildcard += '\\';
      wildcard += pattern[i];
    } else {
      wildcard += pattern[i];
    }
  }
  std::vector<TraceFile> out;
  glob_t g{};
  if (glob(wildcard.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      struct stat st {};
      if (stat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode)) continue;
      // File times come from the kernel's coarse clock (a tick behind at most): 10 ms of slack.
      double mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
      if (mtime < since - 0.01) continue;
      out.push_back(read_trace(g.gl_pathv[i]));
    }
  }
  globfree(&g);
  return out;
}

std::string closing_summary_line(const std::vector<TraceFile>& files) {
  if (files.empty()) return "";
  std::string list, paths;
  for (const TraceFile& f : files) {
    if (!list.empty()) list += ", ";
    list += f.path + " (" + std::to_string(f.events) + (f.events == 1 ? " event" : " events") +
            (f.complete ? "" : ", cut short") + ")";
    paths += " " + f.path;
  }
  const char* what = files.size() == 1 ? "trace" : "traces";
  return std::string("gpumemshim: ") + what + " written to " + list + "; see " + (files.size() == 1 ? "it" : "them") +
         " with: gpumemshim report" + paths + "  (--html report.html for plots)";
}

void print_closing_summary(const RunOutcome& outcome) {
  if (outcome.trace_value.empty()) return;
  std::string line = closing_summary_line(find_trace_files(outcome.trace_value, outcome.started));
  if (!line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace gms::tools
