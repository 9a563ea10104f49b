#include "policy/pointer_tables.h"

#include <algorithm>

namespace gms::policy {

PointerTables::Table* PointerTables::current(Addr base, uint64_t size) {
  auto it = tables_.find(base);
  if (it == tables_.end()) return nullptr;
  if (it->second.size == size) return &it->second;
  tables_.erase(it);
  return nullptr;
}

PointerTables::Table& PointerTables::table(Addr base, uint64_t size) {
  if (Table* t = current(base, size)) return *t;
  Table& t = tables_[base];
  t.size = size;
  lo_ = std::min(lo_, base);
  hi_ = std::max(hi_, base + size);
  return t;
}

size_t PointerTables::news(Addr base, uint64_t size, const std::vector<Word>& words) const {
  auto it = tables_.find(base);
  if (it == tables_.end() || it->second.size != size) return words.size();
  size_t n = 0;
  for (const Word& w : words) {
    auto k = it->second.known.find(w.offset);
    if (k == it->second.known.end() || k->second != w.value) ++n;
  }
  return n;
}

// Drops the table once it holds nothing; else rebuilds what its readers reach.
void PointerTables::settle(Addr base) {
  auto it = tables_.find(base);
  if (it == tables_.end()) return;
  Table& t = it->second;
  if (t.known.size() + t.maybe.size() > cfg_.max_pointers) t.anything = true;
  if (t.known.empty() && t.maybe.empty() && !t.anything) {
    tables_.erase(it);
    return;
  }
  t.reach.stored.clear();
  for (const auto& [offset, value] : t.known) t.reach.stored.push_back(value);
  std::sort(t.reach.stored.begin(), t.reach.stored.end());
  t.reach.stored.erase(std::unique(t.reach.stored.begin(), t.reach.stored.end()), t.reach.stored.end());
  t.reach.maybe = t.maybe;
  t.reach.anything = t.anything;
}

void PointerTables::stored(Addr base, uint64_t size, uint64_t offset, uint64_t bytes, const std::vector<Word>& words) {
  if (!current(base, size) && words.empty()) return;  // no table, and still none
  Table& t = table(base, size);
  t.known.erase(t.known.lower_bound(offset), t.known.lower_bound(offset + bytes));
  // What kernels may have written is gone only where the copy covers the whole table.
  if (offset == 0 && bytes >= t.size) {
    t.maybe.clear();
    t.anything = false;
  }
  for (const Word& w : words) {
    if (t.known.size() + t.maybe.size() > cfg_.max_pointers) break;  // settle marks it
    t.known[w.offset] = w.value;
  }
  if (words.size() > cfg_.max_pointers) t.anything = true;
  settle(base);
}

void PointerTables::may_hold(Addr base, uint64_t size, const std::vector<Addr>& pointers) {
  if (size > cfg_.max_table_bytes || pointers.empty()) return;
  Table& t = table(base, size);
  if (t.anything) return;
  bool changed = false;
  for (Addr p : pointers) {
    if (std::find(t.maybe.begin(), t.maybe.end(), p) != t.maybe.end()) continue;
    t.maybe.push_back(p);
    changed = true;
    if (t.known.size() + t.maybe.size() > cfg_.max_pointers) break;
  }
  if (changed) settle(base);
}

void PointerTables::copied(Addr dst, uint64_t dst_size, uint64_t dst_offset, Addr src, uint64_t src_offset,
                           uint64_t bytes) {
  auto s = tables_.find(src);
  if (s == tables_.end()) {
    cleared(dst, dst_offset, bytes);  // no addresses came: what the bytes held is gone
    return;
  }
  // What the source holds (dst may be src).
  const std::map<uint64_t, Addr> known = s->second.known;
  const std::vector<Addr> maybe = s->second.maybe;
  const bool anything = s->second.anything;
  Table& t = table(dst, dst_size);
  t.known.erase(t.known.lower_bound(dst_offset), t.known.lower_bound(dst_offset + bytes));
  for (auto k = known.lower_bound(src_offset); k != known.end() && k->first < src_offset + bytes; ++k) {
    t.known[dst_offset + (k->first - src_offset)] = k->second;
  }
  for (Addr p : maybe) {
    if (std::find(t.maybe.begin(), t.maybe.end(), p) == t.maybe.end()) t.maybe.push_back(p);
  }
  t.anything = t.anything || anything;
  settle(dst);
}

void PointerTables::cleared(Addr base, uint64_t offset, uint64_t bytes) {
  auto it = tables_.find(base);
  if (it == tables_.end()) return;
  Table& t = it->second;
  t.known.erase(t.known.lower_bound(offset), t.known.lower_bound(offset + bytes));
  if (offset == 0 && bytes >= t.size) {
    t.maybe.clear();
    t.anything = false;
  }
  settle(base);
}

void PointerTables::freed(Addr base) { tables_.erase(base); }

const PointerTables::Reach* PointerTables::reach(Addr addr, Addr* base, uint64_t* size) const {
  auto it = tables_.upper_bound(addr);
  if (it == tables_.begin()) return nullptr;
  --it;
  if (addr >= it->first + it->second.size) return nullptr;
  if (base) *base = it->first;
  if (size) *size = it->second.size;
  return &it->second.reach;
}

}  // namespace gms::policy
