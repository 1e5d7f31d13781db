// Shared helpers of the model tests: where the real models are, one CPU backend per process,
// and small logits utilities.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"

namespace t9::model::testing {

inline std::string models_dir() {
  if (const char* d = std::getenv("TEMPO9_MODELS")) return d;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/tempo9/models";
}

inline std::string model_path(const std::string& file) {
  return models_dir() + "/" + file;
}

inline CpuBackend& cpu_backend() {
  static CpuBackend backend;  // all threads: tests are timed on 2 cores
  return backend;
}

// Loads a real model; a missing model fails the test (never skips).
inline std::unique_ptr<Model> load_model(const std::string& file, const ModelConfig& cfg = {}) {
  auto m = Model::load(model_path(file), cpu_backend(), cfg);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.message());
  if (!m.ok()) return nullptr;
  return std::move(m).value();
}

inline int argmax(std::span<const float> row) {
  int best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i] > row[static_cast<size_t>(best)]) best = static_cast<int>(i);
  return best;
}

inline constexpr const char* kSmolLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr const char* kGemma3 = "gemma-3-270m-Q4_K_M.gguf";
inline constexpr const char* kQwen25 = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";

}  // namespace t9::model::testing
