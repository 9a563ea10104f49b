// Offline: the planner's schedule (policy/step_plan.h) of a recorded step in 10 ms bins of its own
// timing: the share of each bin with a kernel running, a copy in and a copy out. With a third
// argument, every eviction copied (copy_dead). Results: docs/design/schedule.md, "The schedule
// takes turns too".
//   g++ -std=c++20 -O2 -I. docs/analysis/training-residency/plan_bins.cc build/policy/libgms_policy.a -o plan_bins
//   ./plan_bins tests/data/timelines/llama.tl 1.5 copy        (TIMELINE DIVISOR [copy])
#include <cstdio>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <vector>
#include "policy/step_plan.h"
#include "policy/step_floor.h"
using namespace gms::policy;
int main(int argc, char** argv) {
  std::ifstream f(argv[1]); std::stringstream ss; ss << f.rdbuf();
  StepTimeline t; std::string err; StepTimeline::parse(ss.str(), &t, &err);
  StepPlanConfig c; c.budget = t.peak_bytes() / std::stod(argv[2]); c.copy_dead = argc > 3;
  StepPlan p = plan_step(t, c);
  printf("step %.1f kernels %.1f in %.2f GB out %.2f GB floor %.1f\n", p.step_ns/1e6, p.kernel_ns/1e6, p.bytes_in/1e9, p.bytes_out/1e9, lower_bound_ns(t,c)/1e6);
  // busy in 10 ms bins over the measured step
  int nb = p.step_ns / 10000000 + 2;
  std::vector<double> in(nb), out(nb), ker(nb);
  auto add = [&](std::vector<double>& v, double s, double e) {
    for (int b = 0; b < nb; ++b) { double lo = b*1e7, hi = lo+1e7; double o = std::max(0.0, std::min(e,hi)-std::max(s,lo)); v[b] += o; } };
  for (auto& m : p.moves) if (m.copied) add(m.to_device ? in : out, std::max<int64_t>(0,m.start_ns), m.end_ns);
  for (size_t k = 0; k < p.kernel_start_ns.size(); ++k) add(ker, p.kernel_start_ns[k], p.kernel_start_ns[k] + t.kernels[k].dur_ns);
  for (int b = 0; b < nb; ++b) printf("%3d ms: kernels %3.0f%% in %3.0f%% out %3.0f%%\n", b*10, ker[b]/1e5, in[b]/1e5, out[b]/1e5);
}
