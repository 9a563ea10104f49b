#include "names.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/guard.h"

namespace gms::trace::names {
namespace {

constexpr uint32_t kIndexSize = kCapacity * 2;  // open addressing, at most half full

// Zero-initialised, so in BSS: nothing is touched until tracing interns its first name.
std::atomic<const char*> g_names[kCapacity];  // id -> copy; slot 0 unused
uint32_t g_index[kIndexSize];                 // hash slot -> id (0: empty); under g_mu
uint32_t g_count = 1;                         // next id; under g_mu
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

uint64_t hash(const char* s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
  return h;
}

}  // namespace

uint32_t intern(const char* s) {
  if (!s) return 0;
  ShimScope scope;  // the copy below is the shim's memory, never a program's host block
  uint64_t h = hash(s);
  pthread_mutex_lock(&g_mu);
  uint32_t id = 0;
  for (uint32_t i = static_cast<uint32_t>(h) & (kIndexSize - 1);; i = (i + 1) & (kIndexSize - 1)) {
    uint32_t at = g_index[i];
    if (at == 0) {
      if (g_count < kCapacity) {
        size_t n = std::strlen(s);
        char* copy = static_cast<char*>(std::malloc(n + 1));
        if (copy) {
          std::memcpy(copy, s, n + 1);
          id = g_count++;
          g_names[id].store(copy, std::memory_order_release);
          g_index[i] = id;
        }
      }
      break;
    }
    if (std::strcmp(g_names[at].load(std::memory_order_relaxed), s) == 0) {
      id = at;
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return id;
}

const char* name(uint32_t id) {
  if (id == 0 || id >= kCapacity) return nullptr;
  return g_names[id].load(std::memory_order_acquire);
}

void lock_for_fork() { pthread_mutex_lock(&g_mu); }
void unlock_in_parent() { pthread_mutex_unlock(&g_mu); }
void reinit_in_child() { pthread_mutex_init(&g_mu, nullptr); }

}  // namespace gms::trace::names
