// Model hot reload (POST /v1/models/reload): what the server needs from whoever knows how to load a model directory
// (cmd_serve: create_engine with the serve flags), and the reload's steps. The handler is in model_reload.cpp; the
// seam it swaps is ModelHolder (model_holder.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/openai/model_holder.h"

namespace pagoda::server::openai {

struct ModelLoader {
    // What the new model is to serve: with --enable-lora the adapters the old model serves, in their load order (in
    // place of --lora-modules), and the names it is served under (no adapter may take one).
    struct Serving {
        std::vector<engine::LoraInfo> adapters;
        std::vector<std::string> names;
    };
    // Problems with the directory a person can fix (missing, no config.json, a config or tokenizer that does not
    // parse or lacks what the server's task needs, no weights, an adapter directory gone), found without loading the
    // weights: answered with 400, before anything is unloaded.
    std::function<Status(const std::string& model_dir, const Serving& serving)> check;
    // Loads it into a ServedModel ready to install (names are set by the reloader). An error here is a genuine load
    // failure (an adapter that does not fit the new model is one): answered with 500, the old model serving on.
    std::function<Result<std::shared_ptr<ServedModel>>(const std::string& model_dir, const Serving& serving)> load;
    // Whether it loads beside the model served now; else the old one drains first (and is loaded again if the new
    // one then fails).
    std::function<bool(const std::string& model_dir)> fits_beside;
    // Why reloading is not possible with this server's flags (the test generator, several nodes); empty: it is.
    std::string unavailable;
};

}  // namespace pagoda::server::openai
