// Engine options shared by the commands that drive an engine (`tempo9 serve`, `tempo9 run`).
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>

#include "engine/engine.h"

namespace t9::apps {

// --pipeline auto|on|off: EngineConfig::pipeline.
inline void add_pipeline_option(CLI::App& sub, engine::StepPipeline& value) {
  const std::map<std::string, engine::StepPipeline> names{{"auto", engine::StepPipeline::kAuto},
                                                          {"on", engine::StepPipeline::kOn},
                                                          {"off", engine::StepPipeline::kOff}};
  sub.add_option("--pipeline", value,
                 "plan each decode step while the previous one computes (auto: when the "
                 "backend's steps run asynchronously, i.e. CUDA; outputs are identical either way)")
      ->transform(CLI::CheckedTransformer(names, CLI::ignore_case))
      ->default_str("auto");
}

}  // namespace t9::apps
