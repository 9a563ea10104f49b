#include "fake_fault.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fake_fault {

int g_id = -1;
unsigned long g_nth = 0;
int g_code = 2;  // CUDA_ERROR_OUT_OF_MEMORY

namespace {

const char* const* g_names = nullptr;
const std::atomic<unsigned long>* g_calls = nullptr;
int g_count = 0;

[[noreturn]] void bad(const char* value) {
  std::fprintf(stderr, "fake_cuda: FAKE_CUDA_FAIL='%s': expected NAME:N[:CODE] naming an implementation\n", value);
  std::exit(2);
}

void dump_counts() {
  const char* path = std::getenv("FAKE_CUDA_COUNTS");
  if (!path || !g_calls) return;
  std::FILE* f = std::fopen(path, "w");
  if (!f) return;
  for (int i = 0; i < g_count; ++i) {
    unsigned long n = g_calls[i].load(std::memory_order_relaxed);
    if (n) std::fprintf(f, "%s %lu\n", g_names[i], n);
  }
  std::fclose(f);
}

}  // namespace

void configure(const char* const* names, const std::atomic<unsigned long>* calls, int count) {
  g_names = names;
  g_calls = calls;
  g_count = count;
  if (std::getenv("FAKE_CUDA_COUNTS")) std::atexit(dump_counts);
  const char* v = std::getenv("FAKE_CUDA_FAIL");
  if (!v || !*v) return;
  const char* colon = std::strchr(v, ':');
  if (!colon) bad(v);
  for (int i = 0; i < count; ++i) {
    if (std::strlen(names[i]) == static_cast<size_t>(colon - v) && std::strncmp(names[i], v, colon - v) == 0) g_id = i;
  }
  char* end = nullptr;
  g_nth = std::strtoul(colon + 1, &end, 10);
  if (*end == ':') g_code = static_cast<int>(std::strtol(end + 1, &end, 10));
  if (g_id < 0 || g_nth == 0 || *end != '\0') bad(v);
}

}  // namespace fake_fault
