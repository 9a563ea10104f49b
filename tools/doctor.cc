// `gpumemshim doctor`: what this machine offers the shim, in plain words.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_version.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "doctor_parts.h"
#include "gms/build_config.h"
#include "option_check.h"
#include "preload.h"

extern char** environ;

namespace gms::tools {
namespace {

void print_doctor_help() {
  std::printf(
      "Usage: gpumemshim doctor\n\n"
      "Prints what this machine offers the shim: the build of gpumemshim, the NVIDIA driver and every\n"
      "GPU (memory, compute capability, managed and pageable memory access, PCIe link), the CUDA\n"
      "runtime and CUPTI. It talks to the driver directly, never through the shim, and it exits 0 on\n"
      "a machine without a GPU (saying so).\n");
}

// If this process was started with the shim preloaded, its dlsym and driver calls would go through
// the shim: run again without it, so that what doctor reports is the driver's own answer.
void reexec_without_shim(int argc, char** argv) {
  const char* preload = getenv("LD_PRELOAD");
  if (!preload) return;
  std::string cleaned = remove_shim_from_preload(preload);
  if (cleaned == preload) return;
  if (cleaned.empty()) {
    unsetenv("LD_PRELOAD");
  } else {
    setenv("LD_PRELOAD", cleaned.c_str(), 1);
  }
  std::vector<char*> args{const_cast<char*>("gpumemshim")};
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv("/proc/self/exe", args.data());
  // Could not re-execute: go on, through the shim, which is still better than nothing.
}

void print_build_section() {
  std::printf("gpumemshim %s\n", GMS_VERSION);
  std::printf("  built against:  CUDA headers %s\n", GMS_CUDA_INCLUDE_VERSION);
  std::printf("  libunwind:      %s\n", GMS_HAVE_LIBUNWIND ? "compiled in (traces record call sites)"
                                                           : "not compiled in (traces record no call sites)");
  std::vector<std::string> candidates = shim_candidates(self_directory());
  std::string shim = find_shim(candidates);
  std::printf("  shim library:   %s\n", shim.empty() ? "NOT FOUND next to this command" : shim.c_str());
}

void print_environment_section() {
  std::vector<std::string> set;
  for (char** e = environ; *e; ++e) {
    if (std::string(*e).rfind("GPUMEMSHIM_", 0) == 0) set.push_back(*e);
  }
  std::printf("  GPUMEMSHIM_*:   %s\n", set.empty() ? "none set" : "set (a run inherits these):");
  for (const std::string& s : set) std::printf("    %s\n", s.c_str());
  for (const EnvProblem& p : check_environment(environ))
    std::printf("    %s: %s\n", p.fatal ? "INVALID" : "warning", p.line.c_str());
}

// Versions are encoded as 1000 * major + 10 * minor.
std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// Where a toolkit library may be: the loader's search path first (what an application would get),
// then the toolkit this was built with.
std::vector<std::string> toolkit_candidates(const std::string& stem, const std::vector<std::string>& extra_dirs) {
  std::string major = stem + ".so." + std::to_string(CUDA_VERSION / 1000);
  std::vector<std::string> out{major, stem + ".so"};
  std::vector<std::string> dirs{GMS_CUDA_LIBRARY_DIR, "/usr/local/cuda/lib64"};
  dirs.insert(dirs.end(), extra_dirs.begin(), extra_dirs.end());
  for (const std::string& d : dirs) {
    out.push_back(d + "/" + major);
    out.push_back(d + "/" + stem + ".so");
  }
  return out;
}

void print_runtime_section() {
  std::printf("\nCUDA runtime\n");
  std::string error;
  void* lib = dlopen_first(toolkit_candidates("libcudart", {}), &error);
  auto get_version = lib ? reinterpret_cast<decltype(&::cudaRuntimeGetVersion)>(dlsym(lib, "cudaRuntimeGetVersion"))
                         : nullptr;
  int version = 0;
  if (!get_version || get_version(&version) != cudaSuccess) {
    std::printf("  libcudart:      not loadable (%s)\n", lib ? "no cudaRuntimeGetVersion" : error.c_str());
    return;
  }
  std::printf("  libcudart:      %s\n", library_path_of(reinterpret_cast<void*>(get_version)).c_str());
  std::printf("  version:        %s\n", version_text(version).c_str());
}

void print_cupti_section() {
  std::printf("\nCUPTI (used by the tracer for page faults and migrations)\n");
  std::string error;
  std::string lib_dir = GMS_CUDA_LIBRARY_DIR;
  void* lib = dlopen_first(toolkit_candidates("libcupti", {lib_dir + "/../extras/CUPTI/lib64",
                                                           "/usr/local/cuda/extras/CUPTI/lib64"}),
                           &error);
  if (!lib) {
    std::printf("  libcupti:       not loadable (%s)\n", error.c_str());
    return;
  }
  auto get_version = reinterpret_cast<decltype(&::cuptiGetVersion)>(dlsym(lib, "cuptiGetVersion"));
  uint32_t api = 0;
  void* where = get_version ? reinterpret_cast<void*>(get_version) : dlsym(lib, "cuptiActivityEnable");
  std::printf("  libcupti:       loadable, %s\n", library_path_of(where).c_str());
  if (get_version && get_version(&api) == CUPTI_SUCCESS) std::printf("  API version:    %u\n", api);
}

}  // namespace

void* dlopen_first(const std::vector<std::string>& names, std::string* error) {
  for (const std::string& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = dlerror();
    if (e && error->empty()) *error = e;  // the first: the plain name is what applications use
  }
  return nullptr;
}

std::string library_path_of(void* symbol) {
  Dl_info info{};
  if (!symbol || !dladdr(symbol, &info) || !info.dli_fname) return "?";
  return info.dli_fname;
}

void print_toolkit_sections() {
  print_runtime_section();
  print_cupti_section();
}

int doctor_command(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return print_doctor_help(), 0;
    std::fprintf(stderr, "gpumemshim doctor: unexpected argument '%s'\nTry 'gpumemshim doctor --help'.\n",
                 a.c_str());
    return kExitUsage;
  }
  reexec_without_shim(argc, argv);
  print_build_section();
  print_environment_section();
  print_driver_section();
  print_toolkit_sections();
  std::fflush(stdout);
  return 0;
}

}  // namespace gms::tools
