// `pagoda serve`'s task: what the model directory is served for. vLLM's --task (generate, embed, score, ...) and
// --runner (generate, pooling) name it; without them a directory holding sentence-transformers' modules.json with a
// Pooling module (as Qwen3-Embedding ships) is served for embeddings, any other for generation. A reranker that
// scores with its LM head (Qwen3-Reranker, a Qwen3ForCausalLM checkpoint) says nothing of it in its files: it needs
// --task score.
#pragma once

#include <optional>
#include <string>

#include "cli/args.h"
#include "common/status.h"
#include "server/openai/model_holder.h"
#include "server/openai/service.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::cli {

void add_task_flags(ArgParser& parser);

// The task from --task / --runner and the model directory's files; errors name the flag or the file.
Result<server::openai::ModelTask> serve_task_from(const ArgParser& parser, const std::string& model_dir);

// What the task needs of a model served for it: the model's hidden size (from config.json) and, to score, the ids of
// the "no" and "yes" tokens (a tokenizer without them cannot serve a reranker). Read for every model a server loads
// (a reload keeps the task).
Result<server::openai::PoolingSettings> pooling_settings(server::openai::ModelTask task, const Tokenizer& tokenizer,
                                                         const std::string& model_dir);

}  // namespace pagoda::cli
