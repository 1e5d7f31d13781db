// tempo9 — an LLM inference server for agents. Subcommands live in src/apps/cmd_*.cpp.
#include <cstdio>
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : runners)
    if (sub->parsed()) return run();
  return 1;
}
