// Host sampling of one logits row (engine/sampler.h's sample_token) on a 248,320-entry row
// (Qwen3.5's vocabulary), for the sampling settings agents' clients send. Build against the
// engine library of a CPU build:
//   g++ -O2 -std=c++20 -Isrc bench/sampler_bench.cpp -o /tmp/sampler_bench \
//     build-lead/libtempo9_engine.a build-lead/libtempo9_core.a -lfmt && /tmp/sampler_bench
// Prints ms per token and the kept-set size.
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/sampler.h"

namespace {

using t9::engine::SamplingParams;

double ms_per_token(const std::vector<float>& l, const SamplingParams& p, size_t* kept) {
  t9::engine::Rng rng(7);
  const int reps = 20;
  const auto t0 = std::chrono::steady_clock::now();
  long check = 0;
  for (int r = 0; r < reps; ++r)
    check += t9::engine::sample_token(l, p, {}, {}, rng, false, 0).token;
  const auto t1 = std::chrono::steady_clock::now();
  *kept = t9::engine::truncate_candidates(l, p).size();
  if (check < 0) std::printf("impossible\n");
  return std::chrono::duration<double, std::milli>(t1 - t0).count() / reps;
}

}  // namespace

int main() {
  // Logits like a language model's: a normal bulk (sd 2.5) and a few tokens far above it.
  std::mt19937 gen(1);
  std::normal_distribution<float> bulk(0.0f, 2.5f);
  std::vector<float> l(248320);
  for (float& x : l) x = bulk(gen);
  for (int i = 0; i < 8; ++i)
    l[static_cast<size_t>(gen() % l.size())] = 14.0f + static_cast<float>(i);
  struct Case {
    const char* name;
    float temp, top_p, min_p;
    int top_k;
  } cases[] = {{"temperature 0.7 only", 0.7f, 1.0f, 0.0f, 0},
               {"top_p 0.95", 1.0f, 0.95f, 0.0f, 0},
               {"top_p 0.8, top_k 20 (Qwen)", 0.7f, 0.8f, 0.0f, 20},
               {"min_p 0.05", 1.0f, 1.0f, 0.05f, 0},
               {"top_p 0.95, temperature 1.5", 1.5f, 0.95f, 0.0f, 0}};
  std::printf("%-32s %10s %8s\n", "case (248320 logits)", "ms/token", "kept");
  for (const Case& c : cases) {
    SamplingParams p;
    p.temperature = c.temp, p.top_p = c.top_p, p.min_p = c.min_p, p.top_k = c.top_k;
    size_t kept = 0;
    const double ms = ms_per_token(l, p, &kept);
    std::printf("%-32s %10.3f %8zu\n", c.name, ms, kept);
  }
}
