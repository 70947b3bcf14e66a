// The config for a tune key, from memory, the tuning DB, or a tuning run
// (the mode says which are allowed).
#include "autotune/config_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "autotune/prune.h"
#include "autotune/tuner.h"
#include "autotune/tuning_record.h"
#include "cache/cache_dir.h"
#include "cache/cache_error.h"
#include "cache/file_lock.h"
#include "cache/sha256.h"
#include "cache/tuning_db.h"

namespace jit::autotune {
namespace {

bool contains(const std::vector<Json>& configs, const Json& config) {
  return std::find(configs.begin(), configs.end(), config) != configs.end();
}

// The configs a tuning run times, in the order ties are broken.
std::vector<Json> candidates_for(const KernelFamily& family, const Json& spec, const ChoiceContext& context,
                                 const std::vector<Json>& kept) {
  if (context.mode != Mode::fast) return kept;
  return shortlist(family.default_config(spec, context.target), kept, kFastShortlist);
}

Json tune_now(const KernelFamily& family, const Json& spec, const Json& key, const ChoiceContext& context,
              const ChoiceHooks& hooks, const std::vector<Json>& candidates, std::size_t pruned,
              const std::vector<TimedCandidate>& previous) {
  const TuningLog& log = hooks.log;
  log.info_line("tuning {} {} on {}: timing {} configs ({} pruned, {} timed before), compiling on {} threads",
                family.name(), spec.dump(), context.target.device_name, candidates.size(), pruned, previous.size(),
                context.compile_threads);
  auto give_up_if_cancelled = [&] {
    if (hooks.cancelled && hooks.cancelled()) throw TuningCancelled("tuning cancelled: the process is exiting");
  };
  TuneHooks loop;
  loop.variant_name = [&](const Json& config) { return family.variant_name(spec, config); };
  loop.compile = [&](const Json& config) {
    give_up_if_cancelled();
    hooks.compile(config);
  };
  loop.tile_class = tile_class;
  loop.time_us = [&](const Json& config) {
    give_up_if_cancelled();
    const std::function<void()> run = hooks.runner(config);
    // One of kTimingRounds samples: a third of time_on_stream's usual budget.
    TimingOptions options;
    options.target_ms = 10;
    options.flush_l2 = family.memory_bound();
    const double us = time_runs(*hooks.clock, run, options).median_us;
    log.debug_line("  {}: {:.1f} us", family.variant_name(spec, config), us);
    return us;
  };
  const TuneResult result = run_tuning(candidates, loop, previous, context.compile_threads);
  give_up_if_cancelled();  // what was timed is incomplete: keep none of it
  if (hooks.count_tuning_run) hooks.count_tuning_run();
  for (const auto& c : result.candidates) {
    if (!c.error.empty()) log.debug_line("  {}: {}", c.variant, c.error);
  }
  if (!result.winner) {
    std::string why;
    for (const auto& c : result.candidates) why += fmt::format("\n  {}: {}", c.variant, c.error);
    throw NoRunnableCandidate(fmt::format("no candidate of {} could run for {}:{}", family.name(), spec.dump(), why));
  }
  for (const Retimed& r : result.retimed) {
    log.info_line("  re-timed {}: {}; dropped [{:.1f}], kept [{:.1f}] us", r.variant, r.reason,
                  fmt::join(r.discarded_us, ", "), fmt::join(r.kept_us, ", "));
  }
  const TimedCandidate& best = result.candidates[*result.winner];
  log.info_line("tuned {}: {} at {:.1f} us ({} timed now, {} reused)", key.dump(), best.variant, best.median_us,
                result.timed, int(result.candidates.size()) - result.compiled);
  // Keep every timing ever taken for this key, including configs outside
  // today's candidate list, so a later full run re-times nothing.
  std::vector<TimedCandidate> all = result.candidates;
  for (const auto& p : previous) {
    if (std::none_of(all.begin(), all.end(), [&](const auto& c) { return c.config == p.config; })) all.push_back(p);
  }
  if (context.cache_root) {
    // A record that cannot be written costs a re-tune in the next process,
    // never this call.
    try {
      cache::TuningDb(*context.cache_root).store(key, make_record(all, best.config, result.retimed));
    } catch (const cache::UntrustedCacheDir&) {
      throw;
    } catch (const cache::CacheError& e) {
      log.info_line("could not store the tuning record for {}: {}", key.dump(), e.what());
    }
  }
  return best.config;
}

// The DB's winner for `key` when it is still in the pruned space; the record's
// timings go to `previous`.
std::optional<Json> recorded_winner(const ChoiceContext& context, const Json& key, const std::vector<Json>& kept,
                                    std::vector<TimedCandidate>& previous, const TuningLog& log) {
  std::vector<cache::TrustedDir> roots = context.read_only_roots;
  if (context.cache_root) roots.insert(roots.begin(), *context.cache_root);
  std::vector<std::string> skipped;
  const std::optional<Json> record = cache::load_tuning_record(roots, key, &skipped);
  for (const std::string& line : skipped) log.info_line("{}", line);
  if (!record) return std::nullopt;
  std::string why;
  std::optional<std::vector<TimedCandidate>> candidates = record_candidates(*record, &why);
  if (!candidates) {
    log.info_line("the tuning record for {} is malformed ({}): a miss", key.dump(), why);
    return std::nullopt;
  }
  previous = std::move(*candidates);
  const auto it = record->find("winner");
  if (it == record->end() || !contains(kept, *it)) return std::nullopt;
  return *it;
}

Json choose_uncached(const KernelFamily& family, const Json& spec, const Json& key, const ChoiceContext& context,
                     const ChoiceHooks& hooks) {
  const TuningLog& log = hooks.log;
  auto count_db_hit = [&] {
    if (hooks.count_db_hit) hooks.count_db_hit();
  };
  const Json fallback = family.default_config(spec, context.target);
  if (context.mode == Mode::off) {
    log.info_line("CUJIT_AUTOTUNE=off: default config {}", family.variant_name(spec, fallback));
    return fallback;
  }
  const PrunedSpace space = prune_space(family, spec, context.target);
  for (const auto& [config, reason] : space.pruned) {
    log.debug_line("pruned {}: {}", family.variant_name(spec, config), reason);
  }
  std::vector<TimedCandidate> previous;
  std::optional<Json> winner = recorded_winner(context, key, space.kept, previous, log);
  auto untimed = [&](const std::vector<Json>& candidates) {
    return std::count_if(candidates.begin(), candidates.end(), [&](const Json& c) {
      return std::none_of(previous.begin(), previous.end(), [&](const auto& p) { return p.config == c; });
    });
  };
  if (context.mode == Mode::frozen || context.capturing) {
    const char* why = context.capturing ? "the stream is being captured into a CUDA graph, so nothing is timed"
                                        : "CUJIT_AUTOTUNE=frozen";
    const Json chosen = winner ? *winner : fallback;
    log.info_line("{}: {} config {}", why, winner ? "tuning DB" : "default", family.variant_name(spec, chosen));
    if (winner) count_db_hit();
    return chosen;
  }
  const std::vector<Json> candidates = candidates_for(family, spec, context, space.kept);
  // The record settles it when it has a winner and timed every candidate.
  auto settled_by_record = [&] {
    if (!winner || untimed(candidates) != 0) return false;
    count_db_hit();
    log.debug_line("tuning DB hit for {}: {}", key.dump(), family.variant_name(spec, *winner));
    return true;
  };
  if (settled_by_record()) return *winner;
  // One tuning per key per cache directory: other processes wait here, then
  // find the record this one wrote.
  std::optional<cache::FileLock> lock;
  if (context.cache_root) {
    try {
      lock.emplace(*context.cache_root->open_subdir("locks", /*create=*/true), cache::sha256_hex(key.dump()) + ".lock");
    } catch (const cache::UntrustedCacheDir&) {
      throw;
    } catch (const cache::CacheError& e) {
      log.info_line("tuning without the cross-process lock: {}", e.what());
    }
    winner = recorded_winner(context, key, space.kept, previous, log);
    if (settled_by_record()) return *winner;
  }
  return tune_now(family, spec, key, context, hooks, candidates, space.pruned.size(), previous);
}

}  // namespace

Json tune_key(const KernelFamily& family, const Json& spec, const Json& bucket, const ChoiceContext& context) {
  return {{"family", family.name()}, {"arch", context.target.arch}, {"device", context.target.device_name},
          {"spec", spec},           {"bucket", bucket},            {"cujit", context.cujit_version},
          {"nvrtc", context.nvrtc_version}};
}

namespace {

// This process's choices, per CUDA context and tune key. Its own mutex is
// held only to read or write it, never while tuning.
struct Memo {
  std::mutex mutex;
  std::map<std::string, Json> chosen;
};
Memo& memo() {
  static auto* memo = new Memo();  // never destroyed: a background tuning may outlive static destruction
  return *memo;
}
std::optional<Json> memo_find(const std::string& slot) {
  std::lock_guard lock(memo().mutex);
  if (auto it = memo().chosen.find(slot); it != memo().chosen.end()) return it->second;
  return std::nullopt;
}
void memo_store(const std::string& slot, const Json& config) {
  std::lock_guard lock(memo().mutex);
  memo().chosen[slot] = config;
}
std::string memo_slot(const ChoiceContext& context, const Json& key) {
  return fmt::format("{}/{}", context.context, key.dump());
}

}  // namespace

std::string memo_key(const KernelFamily& family, const Json& spec, const Json& bucket, const ChoiceContext& context) {
  return memo_slot(context, tune_key(family, spec, bucket, context));
}

Json choose_config(const KernelFamily& family, const Json& spec, const Json& bucket, const ChoiceContext& context,
                   const ChoiceHooks& hooks) {
  const Json key = tune_key(family, spec, bucket, context);
  const std::string slot = memo_slot(context, key);
  // One tuning at a time in this process: other threads asking for a key
  // being tuned wait for its result instead of timing it again. Never
  // destroyed: a background tuning may hold it during static destruction.
  static auto* tuning = new std::mutex();
  std::lock_guard lock(*tuning);
  if (std::optional<Json> known = memo_find(slot)) return *known;
  Json chosen = choose_uncached(family, spec, key, context, hooks);
  // A choice made during graph capture is not final: the first call
  // outside a capture may still tune.
  if (!context.capturing) memo_store(slot, chosen);
  return chosen;
}

std::optional<Json> known_config(const KernelFamily& family, const Json& spec, const Json& bucket,
                                 const ChoiceContext& context, const ChoiceHooks& hooks) {
  const Json key = tune_key(family, spec, bucket, context);
  const std::string slot = memo_slot(context, key);
  if (std::optional<Json> known = memo_find(slot)) return known;
  if (context.mode == Mode::off) return family.default_config(spec, context.target);
  const PrunedSpace space = prune_space(family, spec, context.target);
  std::vector<TimedCandidate> previous;
  const std::optional<Json> winner = recorded_winner(context, key, space.kept, previous, hooks.log);
  if (!winner) return std::nullopt;
  for (const Json& c : candidates_for(family, spec, context, space.kept)) {
    if (std::none_of(previous.begin(), previous.end(), [&](const auto& p) { return p.config == c; })) {
      return std::nullopt;  // the record lacks a candidate: tuning would time it
    }
  }
  if (hooks.count_db_hit) hooks.count_db_hit();
  hooks.log.debug_line("tuning DB hit for {}: {}", key.dump(), family.variant_name(spec, *winner));
  if (!context.capturing) memo_store(slot, *winner);
  return winner;
}

}  // namespace jit::autotune
