#pragma once
// Learns a program's repeating step while it runs, and then says, for each live allocation, how many
// launches from now the step will use it next: the knowledge the residency planner needs to evict
// what is used again farthest ahead and to bring memory back ahead of its use
// (docs/design/schedule.md).
//
// How: each launch is keyed by its function and the bytes alive at it (so that a layer repeated
// inside the step, with other bytes alive, does not look like the step), and the last few keys are
// hashed together; a hash seen before starts a candidate period (the distance to an earlier
// occurrence), which holds while each launch matches the one a period before: the same key (or,
// for a step whose memory grows a little each time, like decoding with a key/value cache that grows
// by a token, the same function and nearly the same bytes alive), and no memory used now that was
// there a period before and went unused then (a layer repeated uses weights of its own, so it is
// not the step even where the bytes alive do not tell layers apart). Growing steps are also found
// from hashes of the launches' functions and the allocations they use that lived long. The longest candidate
// that has held for a whole period, over a few different keys, is the step (the same kernel run many
// times over the same memory, like an optimizer's per-tensor loop, repeats with any period). Then two more
// steps are recorded: allocations are named by where in the step they were made (the k-th of that
// size made before the launch at position b) or, if made before the recording, by their address; the
// second step gives which names each launch uses and where each name is freed. From then on the
// learner follows the program: each launch must be the function the step has at that position, and
// an allocation made at a position takes the name the step gave it. A launch that differs ends the
// following (another batch shape, an evaluation step): the learner starts over.
//
// Costs: per launch O(window + candidates + the launch's allocations); memory O(period * uses).
// Pure code: no CUDA, no globals, no I/O.
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace gms::policy {

struct StepLearnerConfig {
  uint32_t window = 8;        // functions hashed together
  uint32_t candidates = 4;    // earlier occurrences kept per hash
  uint32_t runs = 64;         // candidate periods checked at once
  uint64_t min_period = 16;   // shorter patterns are not steps
  uint32_t min_distinct = 3;  // nor are periods of fewer different launches (one kernel run many times)
  uint64_t max_period = 1 << 14;  // launches; a 48-layer transformer's step has about 8,000
  // A step that grows: the bytes alive may differ by this share (1/n) of them from a period before.
  uint32_t growth_share = 1024;
  // Allocations that have lived this many launches, and half the search, key the hashes of
  // growing steps.
  uint64_t settled = 64;
  uint32_t max_args = 16;  // a launch's allocations kept while searching (the first ones)
};

class StepLearner {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;        // freed before it is used again
  static constexpr uint64_t kUnknown = UINT64_MAX - 1;  // not following, or an allocation the step does not know

  explicit StepLearner(StepLearnerConfig cfg = {});

  // The program's events, in its order. `bases`: the allocations (their bases, as made) the launch
  // uses; unknown ones are ignored.
  void made(uint64_t ptr, uint64_t bytes);
  void freed(uint64_t ptr);
  void launched(uint64_t fn, const uint64_t* bases, size_t n);

  enum class State : uint8_t { searching, recording, following };
  State state() const { return state_; }
  uint64_t period() const { return period_; }
  // Position of the next launch within the step (following only).
  uint64_t position() const { return pos_; }
  // Times the program left the step it followed.
  uint64_t divergences() const { return divergences_; }
  // Launches seen so far: the clock next uses count in (a next use of k at launches() == c is due
  // at launch c + k + 1).
  uint64_t launches() const { return launches_; }

  // While following: launches from the next one until the live allocation at `ptr` is used again
  // (0: the next launch uses it), kNever when it is freed first, kUnknown when the learner cannot say.
  uint64_t next_use(uint64_t ptr) const;
  // While following: launches from the next one until the allocation at `ptr` next needs device
  // memory or gives it back: its next use, or its free when that comes first (kNever: neither
  // within the step, kUnknown as above).
  uint64_t next_need(uint64_t ptr) const;
  // While following: the allocations (their bases) the launches `ahead` positions from the next one
  // will use (ahead 0: the next launch), those alive now.
  void uses_ahead(uint64_t ahead, std::vector<uint64_t>* bases) const;

 private:
  // An allocation's name within the step: made at `born` (the k-th of its size there), or made
  // before the step (born == kOld, k unused, ptr names it).
  static constexpr uint64_t kOld = UINT64_MAX;
  struct Name {
    uint64_t born = kOld;
    uint64_t bytes = 0;
    uint32_t k = 0;
    uint64_t ptr = 0;
    bool operator==(const Name&) const = default;
  };
  struct NameHash {
    size_t operator()(const Name& n) const;
  };
  struct Live {
    Name name;
    uint64_t bytes = 0;
    uint64_t serial = 0;  // which allocation: addresses are reused
    uint64_t made = 0;    // launches of the search before it was made
  };
  // Searching: an allocation a launch used.
  struct Arg {
    uint64_t ptr = 0, serial = 0, made = 0;
  };

  void search(uint64_t fn, const uint64_t* bases, size_t n);
  // Whether the launch now (its allocations `args`) uses nothing that lived through the last `p`
  // launches and that the launch `p` before did not use.
  bool same_settled(uint64_t p, const Arg* args, size_t n) const;
  // Whether the last p keys hold at least min_distinct different ones.
  bool distinct(uint64_t p) const;
  void record(uint64_t fn, const uint64_t* bases, size_t n);
  void follow(uint64_t fn, const uint64_t* bases, size_t n);
  void propose(uint64_t window_hash);
  void forget_search();
  void start_over();
  void advance();
  uint32_t id(const Name& n);
  // Launches from the next one to position q of the step (0 when it is the next), cyclic.
  uint64_t ahead_of(uint64_t q) const { return (q + period_ - pos_) % period_; }

  StepLearnerConfig cfg_;
  State state_ = State::searching;
  // Searching: the keys of the last max_period launches (a ring), each window hash's last positions,
  // and the candidate periods with the launches each has held for.
  std::vector<uint64_t> keys_;
  std::vector<uint64_t> settled_keys_;  // the function and the long-lived allocations it uses
  std::vector<uint64_t> fn_at_, live_at_;  // per launch, as keys_
  std::vector<Arg> args_at_;               // per launch, max_args each
  std::vector<uint32_t> nargs_at_;
  uint64_t count_ = 0;  // launches since the search started
  uint64_t serial_ = 0;
  std::vector<Arg> scratch_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> seen_;
  std::unordered_map<uint64_t, uint64_t> runs_;
  // The step.
  uint64_t period_ = 0;
  uint64_t pos_ = 0;
  uint64_t recorded_ = 0;                           // launches recorded so far (two steps)
  std::vector<uint64_t> fns_;                       // per position
  std::vector<std::vector<uint32_t>> uses_;         // per position: ids into names_
  std::vector<Name> names_;
  std::unordered_map<Name, uint32_t, NameHash> id_of_;
  std::vector<std::vector<uint64_t>> use_positions_;  // per id, sorted
  std::vector<uint64_t> death_;                     // per id: the position it is freed at, or kNever
  // Live allocations, the bytes they hold, the newest live one of each name, and how many of each
  // size were made before the next launch.
  std::unordered_map<uint64_t, Live> live_;
  uint64_t live_bytes_ = 0;
  std::unordered_map<Name, uint64_t, NameHash> ptr_of_;
  std::unordered_map<uint64_t, uint32_t> made_here_;  // bytes -> count at pos_
  uint64_t divergences_ = 0;
  uint64_t launches_ = 0;
};

}  // namespace gms::policy
