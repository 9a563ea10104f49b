// The driver part of `gpumemshim doctor`: the driver's version and every GPU's facts that decide how
// the shim can place memory (managed access, pageable access, the PCIe link that migrations cross).
#include <cuda.h>
#include <dlfcn.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "doctor_parts.h"

namespace gms::tools {
namespace {

template <typename Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

// The driver entry points doctor uses, with their types from <cuda.h>. The versioned names are the
// ones <cuda.h> maps the plain names to (cuDeviceTotalMem -> cuDeviceTotalMem_v2).
struct Driver {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_version = nullptr;
  decltype(&::cuDeviceGetCount) device_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetName) device_name = nullptr;
  decltype(&::cuDeviceTotalMem) total_mem = nullptr;
  decltype(&::cuDeviceGetAttribute) attribute = nullptr;
  decltype(&::cuDeviceGetPCIBusId) pci_bus_id = nullptr;
  decltype(&::cuGetErrorName) error_name = nullptr;

  bool load(void* lib) {
    init = symbol<decltype(init)>(lib, "cuInit");
    driver_version = symbol<decltype(driver_version)>(lib, "cuDriverGetVersion");
    device_count = symbol<decltype(device_count)>(lib, "cuDeviceGetCount");
    device_get = symbol<decltype(device_get)>(lib, "cuDeviceGet");
    device_name = symbol<decltype(device_name)>(lib, "cuDeviceGetName");
    total_mem = symbol<decltype(total_mem)>(lib, "cuDeviceTotalMem_v2");
    attribute = symbol<decltype(attribute)>(lib, "cuDeviceGetAttribute");
    pci_bus_id = symbol<decltype(pci_bus_id)>(lib, "cuDeviceGetPCIBusId");
    error_name = symbol<decltype(error_name)>(lib, "cuGetErrorName");
    // The bus id and error names are optional: without them doctor still has most to say.
    return init && driver_version && device_count && device_get && device_name && total_mem && attribute;
  }

  std::string error(CUresult r) const {
    const char* name = nullptr;
    if (!error_name || error_name(r, &name) != CUDA_SUCCESS || !name) return "CUresult " + std::to_string(r);
    return name;
  }
};

// NVML has no header in the toolkit; these few entry points and their C types have been stable since
// NVML's first releases (an opaque device handle, 0 for success).
using NvmlReturn = int;
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;

struct Nvml {
  void* lib = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*by_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*cur_gen)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*cur_width)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*max_gen)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*max_width)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*driver_release)(char*, unsigned) = nullptr;

  // True once NVML is loaded and initialised; false leaves PCIe facts to sysfs.
  bool open() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    auto init = symbol<NvmlReturn (*)()>(lib, "nvmlInit_v2");
    shutdown = symbol<decltype(shutdown)>(lib, "nvmlShutdown");
    by_bus_id = symbol<decltype(by_bus_id)>(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    cur_gen = symbol<decltype(cur_gen)>(lib, "nvmlDeviceGetCurrPcieLinkGeneration");
    cur_width = symbol<decltype(cur_width)>(lib, "nvmlDeviceGetCurrPcieLinkWidth");
    max_gen = symbol<decltype(max_gen)>(lib, "nvmlDeviceGetMaxPcieLinkGeneration");
    max_width = symbol<decltype(max_width)>(lib, "nvmlDeviceGetMaxPcieLinkWidth");
    driver_release = symbol<decltype(driver_release)>(lib, "nvmlSystemGetDriverVersion");
    if (!init || !shutdown || !by_bus_id || !cur_gen || !cur_width || !max_gen || !max_width || init() != 0) {
      shutdown = nullptr;
      return false;
    }
    return true;
  }
  ~Nvml() {
    if (shutdown) shutdown();
  }

  // The driver's release ("580.82.07"), or "" if NVML cannot tell.
  std::string release() const {
    char buf[96] = "";
    if (!shutdown || !driver_release || driver_release(buf, sizeof(buf)) != 0) return "";
    return buf;
  }

  // "gen 4 x16 (max gen 4 x16), from NVML", or "" if NVML cannot tell.
  std::string link(const std::string& bus_id) const {
    NvmlDevice dev = nullptr;
    unsigned cg = 0, cw = 0, mg = 0, mw = 0;
    if (!shutdown || by_bus_id(bus_id.c_str(), &dev) != 0) return "";
    if (cur_gen(dev, &cg) != 0 || cur_width(dev, &cw) != 0) return "";
    std::string s = "gen " + std::to_string(cg) + " x" + std::to_string(cw);
    if (max_gen(dev, &mg) == 0 && max_width(dev, &mw) == 0)
      s += " (max gen " + std::to_string(mg) + " x" + std::to_string(mw) + ")";
    return s + ", from NVML";
  }
};

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// PCIe generation from a sysfs link speed ("16.0 GT/s PCIe"): each generation doubles the rate
// from 2.5 GT/s, except that gen 3 went to 8 GT/s with a better encoding.
int pcie_generation(const std::string& speed) {
  double gts = std::atof(speed.c_str());
  static const struct { double gts; int gen; } kGens[] = {{2.5, 1}, {5, 2}, {8, 3}, {16, 4}, {32, 5}, {64, 6}};
  for (const auto& g : kGens) {
    if (gts > g.gts * 0.9 && gts < g.gts * 1.1) return g.gen;
  }
  return 0;
}

std::string sysfs_link_part(const std::string& dir, const char* which) {
  std::string speed = read_first_line(dir + "/" + which + "_link_speed");
  std::string width = read_first_line(dir + "/" + which + "_link_width");
  if (speed.empty() || width.empty()) return "";
  int gen = pcie_generation(speed);
  return (gen ? "gen " + std::to_string(gen) : speed) + " x" + width;
}

// The same from /sys/bus/pci/devices (lower-case bus ids there); "" if not readable.
std::string sysfs_link(std::string bus_id) {
  for (char& c : bus_id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string dir = "/sys/bus/pci/devices/" + bus_id;
  std::string cur = sysfs_link_part(dir, "current");
  if (cur.empty()) return "";
  std::string max = sysfs_link_part(dir, "max");
  return cur + (max.empty() ? "" : " (max " + max + ")") + ", from sysfs";
}

int attribute_or(const Driver& d, CUdevice dev, CUdevice_attribute a, int fallback) {
  int v = 0;
  return d.attribute(&v, a, dev) == CUDA_SUCCESS ? v : fallback;
}

const char* yes_no(int v) { return v > 0 ? "yes" : (v == 0 ? "no" : "unknown"); }

void print_device(const Driver& d, const Nvml& nvml, int ordinal) {
  CUdevice dev = 0;
  if (CUresult r = d.device_get(&dev, ordinal); r != CUDA_SUCCESS) {
    std::printf("GPU %d: cuDeviceGet failed: %s\n", ordinal, d.error(r).c_str());
    return;
  }
  char name[256] = "?";
  d.device_name(name, sizeof(name), dev);
  size_t total = 0;
  d.total_mem(&total, dev);
  int major = attribute_or(d, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, -1);
  int minor = attribute_or(d, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, -1);
  int concurrent = attribute_or(d, dev, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, -1);
  int pageable = attribute_or(d, dev, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, -1);
  char bus[32] = "";
  bool have_bus = d.pci_bus_id && d.pci_bus_id(bus, sizeof(bus), dev) == CUDA_SUCCESS;

  std::printf("GPU %d: %s\n", ordinal, name);
  std::printf("  total memory:            %.2f GiB (%zu bytes)\n", static_cast<double>(total) / (1u << 30), total);
  std::printf("  compute capability:      %d.%d\n", major, minor);
  // These two decide what spilling can do: without concurrent managed access, managed memory is not
  // paged on demand while kernels run; with pageable access, the GPU can read plain malloc memory.
  std::printf("  concurrentManagedAccess: %s\n", yes_no(concurrent));
  std::printf("  pageableMemoryAccess:    %s\n", yes_no(pageable));
  std::printf("  PCI bus id:              %s\n", have_bus ? bus : "not readable");
  std::string link = have_bus ? nvml.link(bus) : "";
  if (link.empty() && have_bus) link = sysfs_link(bus);
  std::printf("  PCIe link:               %s\n", link.empty() ? "not readable" : link.c_str());
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

}  // namespace

bool print_driver_section() {
  std::printf("\nNVIDIA driver\n");
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("  no NVIDIA driver found (libcuda.so.1 not loadable): this machine has no usable GPU\n");
    std::printf("  (dlopen said: %s)\n", dlerror());
    return false;
  }
  Driver d;
  if (!d.load(lib)) {
    std::printf("  libcuda.so.1 (%s) lacks basic entry points: a broken or stand-in driver\n",
                library_path_of(dlsym(lib, "cuInit")).c_str());
    return false;
  }
  int version = 0;
  d.driver_version(&version);
  Nvml nvml;
  nvml.open();
  std::string release = nvml.release();
  std::printf("  libcuda:        %s\n", library_path_of(reinterpret_cast<void*>(d.init)).c_str());
  std::printf("  driver version: %s (CUDA %s; cuDriverGetVersion = %d)\n",
              release.empty() ? "release not readable" : release.c_str(), version_text(version).c_str(), version);
  if (CUresult r = d.init(0); r != CUDA_SUCCESS) {
    std::printf("  cuInit failed: %s: this machine has no usable GPU\n", d.error(r).c_str());
    return false;
  }
  int count = 0;
  d.device_count(&count);
  std::printf("  GPUs:           %d\n\n", count);
  for (int i = 0; i < count; ++i) print_device(d, nvml, i);
  return true;
}

}  // namespace gms::tools
