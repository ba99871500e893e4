// `pagoda serve`'s task: --task / --runner, else the model directory's sentence-transformers files.
#include "cli/serve_task.h"

#include "common/file.h"
#include "common/json.h"
#include "model/model_spec.h"

namespace pagoda::cli {

using server::openai::ModelTask;

namespace {

Result<Json> read_json(const std::string& path) {
    PAGODA_ASSIGN_OR_RETURN(const std::string text, read_file(path));
    auto j = Json::parse(text);
    if (!j.ok()) return j.status().with_context(path);
    return std::move(j).value();
}

// modules.json's Pooling module, if any: embeddings, provided it pools the last token (Qwen3-Embedding's
// 1_Pooling/config.json says pooling_mode_lasttoken); other poolings are refused rather than served wrong.
Result<bool> has_last_token_pooling(const std::string& model_dir) {
    const std::string modules_path = model_dir + "/modules.json";
    if (!file_exists(modules_path)) return false;
    PAGODA_ASSIGN_OR_RETURN(const Json modules, read_json(modules_path));
    if (!modules.is_array()) return Status::error(modules_path + ": not a JSON list of modules");
    for (const Json& m : modules.as_array()) {
        const Json* type = m.find("type");
        if (!type || !type->is_string() || type->as_string() != "sentence_transformers.models.Pooling") continue;
        const Json* path = m.find("path");
        const std::string config_path = model_dir + "/" +
                                        (path && path->is_string() ? path->as_string() : std::string("1_Pooling")) +
                                        "/config.json";
        PAGODA_ASSIGN_OR_RETURN(const Json pooling, read_json(config_path));
        const Json* last = pooling.find("pooling_mode_lasttoken");
        if (!last || !last->is_bool() || !last->as_bool())
            return Status::error(config_path + ": only last-token pooling (pooling_mode_lasttoken) is supported");
        return true;
    }
    return false;
}

}  // namespace

void add_task_flags(ArgParser& p) {
    p.add_option("task", "TASK",
                 "auto (default: embed when MODEL_DIR has sentence-transformers' modules.json with a Pooling module, "
                 "else generate) | generate | embed (/v1/embeddings) | score (/v1/score, /v1/rerank: a reranker "
                 "scoring with the logits of \"no\" and \"yes\", as Qwen3-Reranker)");
    p.add_option("runner", "RUNNER", "vLLM's spelling: generate | pooling (embed unless --task says score)");
}

Result<ModelTask> serve_task_from(const ArgParser& p, const std::string& model_dir) {
    std::string task = p.get("task").value_or("auto");
    if (task == "embedding") task = "embed";  // vLLM's older name
    if (task == "rerank") task = "score";
    if (task != "auto" && task != "generate" && task != "embed" && task != "score")
        return Status::error("--task " + task + ": supported are auto, generate, embed and score");
    if (auto runner = p.get("runner")) {
        if (*runner != "generate" && *runner != "pooling" && *runner != "auto")
            return Status::error("--runner " + *runner + ": supported are generate and pooling");
        if (*runner == "generate" && (task == "embed" || task == "score"))
            return Status::error("--runner generate cannot serve --task " + task);
        if (*runner == "pooling" && task == "generate")
            return Status::error("--runner pooling cannot serve --task generate");
        if (*runner == "generate") task = "generate";
        if (*runner == "pooling" && task == "auto") task = "embed";
    }
    if (task == "generate") return ModelTask::kGenerate;
    if (task == "embed") return ModelTask::kEmbed;
    if (task == "score") return ModelTask::kScore;
    PAGODA_ASSIGN_OR_RETURN(const bool pooling, has_last_token_pooling(model_dir));
    return pooling ? ModelTask::kEmbed : ModelTask::kGenerate;
}

Result<server::openai::PoolingSettings> pooling_settings(ModelTask task, const Tokenizer& tokenizer,
                                                         const std::string& model_dir) {
    server::openai::PoolingSettings out;
    if (task == ModelTask::kGenerate) return out;
    // A sentence-transformers Pooling module other than last-token is refused (also under an explicit --task embed).
    if (task == ModelTask::kEmbed) PAGODA_RETURN_IF_ERROR(has_last_token_pooling(model_dir));
    PAGODA_ASSIGN_OR_RETURN(const model::ModelSpec spec, model::load_model_spec(model_dir + "/config.json"));
    out.hidden_size = static_cast<int32_t>(spec.hidden_size);
    if (task == ModelTask::kScore) {
        for (const char* word : {"no", "yes"}) {
            const auto id = tokenizer.token_to_id(word);
            if (!id) return Status::error(std::string("--task score: the tokenizer has no token \"") + word + "\"");
            out.score_token_ids.push_back(*id);
        }
    }
    return out;
}

}  // namespace pagoda::cli
