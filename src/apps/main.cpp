// tempo9 — an LLM inference server for agents. Subcommands live in src/apps/cmd_*.cpp.
#include <algorithm>
#include <cstdio>
#include <string>
#include <map>
#include <memory>
#include <vector>

#include "apps/command.h"

namespace t9::apps {

static std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

bool register_command(Command cmd) {
  registry().push_back(std::move(cmd));
  return true;
}

}  // namespace t9::apps

int main(int argc, char** argv) {
  using namespace t9::apps;
  CLI::App app{"tempo9 — an LLM inference server for agents (OpenAI, Anthropic, Ollama on one port)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tempo9 0.1.0");
  std::map<CLI::App*, std::function<int()>> runners;
  for (auto& cmd : registry()) {
    CLI::App* sub = app.add_subcommand(cmd.name, cmd.description);
    runners[sub] = cmd.setup(*sub);
  }
  // The seed's spelling `tempo9 --gguf MODEL --port 11435` means `tempo9 serve --gguf ...`.
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0].starts_with("-") && args[0] != "-h" && args[0] != "--help" &&
      args[0] != "--version")
    args.insert(args.begin(), "serve");
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : runners)
    if (sub->parsed()) return run();
  return 1;
}
