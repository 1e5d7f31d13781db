// Subcommands of the `tempo9` executable register themselves: each src/apps/cmd_*.cpp defines a
// static Command, so adding a command touches no shared file.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace t9::apps {

struct Command {
  std::string name;
  std::string description;
  // Adds options to `sub` and returns the function to run once parsing succeeded (exit code).
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

// Registers at static-initialisation time; returns a dummy for `static bool x = ...`.
bool register_command(Command cmd);

}  // namespace t9::apps
