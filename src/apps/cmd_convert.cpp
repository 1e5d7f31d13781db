// `tempo9 convert HF_DIR -o OUT.gguf [--type F32|F16|BF16|Q8_0|...]`: a Hugging Face checkpoint
// (config.json + model.safetensors) to a GGUF with llama.cpp's names (model/convert/hf_convert.h).
#include <cstdio>

#include "apps/command.h"
#include "model/convert/hf_convert.h"

namespace t9::apps {
namespace {

struct ConvertArgs {
  std::string dir, out, type = "F32", name;
};

const bool registered = register_command(Command{
    "convert", "Convert a Hugging Face checkpoint directory to GGUF",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<ConvertArgs>();
      sub.add_option("dir", args->dir, "directory with config.json and model.safetensors")->required();
      sub.add_option("-o,--out", args->out, "output GGUF file")->required();
      sub.add_option("--type", args->type, "type of 2-D weights (F32, F16, BF16, Q8_0, Q4_K, ...)");
      sub.add_option("--name", args->name, "general.name to record");
      return [args] {
        auto type = type_from_name(args->type);
        if (!type) {
          std::fprintf(stderr, "tempo9 convert: unknown type '%s'\n", args->type.c_str());
          return 2;
        }
        convert::ConvertOptions opt{args->dir, args->out, *type, args->name};
        if (Status s = convert::convert_hf_to_gguf(opt); !s.ok()) {
          std::fprintf(stderr, "tempo9 convert: %s\n", s.message().c_str());
          return 1;
        }
        std::fprintf(stderr, "tempo9 convert: wrote %s\n", args->out.c_str());
        return 0;
      };
    }});

}  // namespace
}  // namespace t9::apps
