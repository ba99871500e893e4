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
    // Problems with the directory a person can fix (missing, no config.json, a config or tokenizer that does not
    // parse, no weights), found without loading the weights: answered with 400.
    std::function<Status(const std::string& model_dir)> check;
    // Loads it into a ServedModel ready to install (names are set by the reloader), serving `adapters` (with
    // --enable-lora: the adapters the old model serves, in their load order, in place of --lora-modules). An error
    // here is a genuine load failure (an adapter that does not fit the new model is one): answered with 500, the old
    // model serving on.
    std::function<Result<std::shared_ptr<ServedModel>>(const std::string& model_dir,
                                                       const std::vector<engine::LoraInfo>& adapters)>
        load;
    // Whether it loads beside the model served now; else the old one drains first (and is loaded again if the new
    // one then fails).
    std::function<bool(const std::string& model_dir)> fits_beside;
    // Why reloading is not possible with this server's flags (the test generator, several nodes); empty: it is.
    std::string unavailable;
};

}  // namespace pagoda::server::openai
