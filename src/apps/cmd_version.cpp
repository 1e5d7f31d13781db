// `tempo9 version`: prints the version and which backends this build has.
#include <cstdio>

#include "apps/command.h"

namespace t9::apps {
namespace {

const bool registered = register_command(Command{
    "version", "Print the version and the compiled-in backends",
    [](CLI::App&) -> std::function<int()> {
      return [] {
#ifdef TEMPO9_HAVE_CUDA
        std::printf("tempo9 0.1.0 (backends: cpu, cuda)\n");
#else
        std::printf("tempo9 0.1.0 (backends: cpu)\n");
#endif
        return 0;
      };
    }});

}  // namespace
}  // namespace t9::apps
