// `pagoda serve`'s multi-LoRA flags, as vLLM names them: --enable-lora, --lora-modules name=path [name=path ...]
// (or vLLM's JSON form {"name": ..., "path": ...}), --max-loras, --max-lora-rank, --max-cpu-loras.
#pragma once

#include <string>
#include <vector>

#include "cli/args.h"
#include "common/status.h"
#include "executor/create_engine.h"

namespace pagoda::cli {

void add_lora_flags(ArgParser& parser);
// vLLM's --lora-modules takes several values after one flag: each becomes a --lora-modules=VALUE of its own.
std::vector<std::string> split_lora_modules(std::vector<std::string> args);
// The flags into `options` (checked: the LoRA flags need --enable-lora, adapter names differ from the served names
// and from each other, ranks and counts in range).
Status apply_lora_flags(const ArgParser& parser, const std::vector<std::string>& served_names,
                        executor::EngineOptions& options);

}  // namespace pagoda::cli
