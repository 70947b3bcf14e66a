// The hot path's table: what serves each exact problem seen before (its
// launch plan, as the runtime's Value), and, while that was built from a
// provisional config (CUJIT_AUTOTUNE=background), the ticket of the tuning
// that will replace it. A call reads the table under one mutex; a
// provisional entry costs one more atomic load until its ticket settles,
// then the first call that may swap rebuilds the entry with the winner
// (or, when the tuning failed, keeps the default and stops asking).
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include "autotune/background_tuner.h"

namespace jit::autotune {

template <class Key, class Value, class Hash>
class ServedTable {
 public:
  struct Entry {
    Value value;
    std::shared_ptr<const TuningTicket> pending;  // null once the config is final
    bool keep = true;                              // false: serve this call only (graph capture)
  };

  // Bounded: varying lengths must not grow it without end.
  explicit ServedTable(std::size_t max_entries) : max_entries_(max_entries) {}

  // The value for `key`: the stored one; for a key not seen, make()'s
  // Entry (stored when keep); for a provisional one whose tuning is ready,
  // remake(winner) once may_swap() allows (asked only then, outside the
  // lock). make, remake and may_swap may throw: the table is unchanged.
  template <class Make, class Remake, class MaySwap>
  Value get(const Key& key, Make&& make, Remake&& remake, MaySwap&& may_swap) {
    std::shared_ptr<const TuningTicket> settled;
    std::optional<Value> current;
    {
      std::lock_guard lock(mutex_);
      if (auto it = entries_.find(key); it != entries_.end()) {
        Entry& e = it->second;
        if (!e.pending || e.pending->state() == TuningTicket::State::running) return e.value;
        if (e.pending->state() == TuningTicket::State::failed) {
          e.pending.reset();  // the default keeps serving
          return e.value;
        }
        settled = e.pending;
        current = e.value;
      }
    }
    if (settled && !may_swap()) return *current;
    Entry entry = settled ? Entry{remake(settled->winner()), nullptr, true} : make();
    if (!entry.keep) return entry.value;
    std::lock_guard lock(mutex_);
    if (entries_.size() >= max_entries_) entries_.clear();
    entries_.insert_or_assign(key, entry);
    return entry.value;
  }

  // Entries still built from a provisional config (for tests and tools).
  std::size_t provisional() const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const auto& [key, e] : entries_) n += e.pending != nullptr;
    return n;
  }

 private:
  const std::size_t max_entries_;
  mutable std::mutex mutex_;
  std::unordered_map<Key, Entry, Hash> entries_;
};

}  // namespace jit::autotune
