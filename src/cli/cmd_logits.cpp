// `pagoda logits`: the logits of every position of a token sequence (one prefill, on the CPU or one GPU).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "model/dummy_checkpoint.h"
#include "model/model.h"
#include "model/runner.h"
#include "runtime/backend.h"
#include "runtime/cuda_backend.h"

namespace {

using namespace pagoda;

void append_float(std::string& out, float v) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);  // shortest text that reads back as the same float
    out.append(buf, ec == std::errc() ? end : buf);
}

// `rows` rows of `width` floats as a JSON array of arrays.
void append_rows(std::string& out, const float* data, size_t rows, size_t width) {
    out += '[';
    for (size_t r = 0; r < rows; ++r) {
        out += r ? ",[" : "[";
        for (size_t i = 0; i < width; ++i) {
            if (i) out += ',';
            append_float(out, data[r * width + i]);
        }
        out += ']';
    }
    out += ']';
}

int run_logits(std::span<const std::string_view> args) {
    cli::ArgParser parser("pagoda logits --model DIR --ids \"1 2 3\" [--json] [--last N] [--device cpu|cuda]",
                          "Runs the model over the token ids and prints the logits of every position.\n"
                          "Text output: the top 5 tokens of each position. --json: {\"logits\": [[...], ...]} with\n"
                          "every vocabulary entry of every position; with --hidden also \"hidden\": the residual\n"
                          "stream of those positions after the embedding (0) and after each layer (1..L), as\n"
                          "transformers' output_hidden_states gives them (its last entry is after the final norm,\n"
                          "ours before it).");
    parser.add_option("model", "DIR", "model directory (config.json + *.safetensors)");
    parser.add_option("ids", "IDS", "token ids separated by spaces or commas");
    parser.add_switch("json", "print one JSON object with all logits");
    parser.add_switch("hidden", "with --json: also each layer's hidden states (to find where two runs part)");
    parser.add_option("threads", "N", "CPU threads (default: all cores)");
    parser.add_option("last", "N", "print only the last N positions (default: all)");
    parser.add_option("device", "DEV", "cpu (default) | cuda");
    parser.add_option("quantization", "METHOD", "fp8: quantize a bf16 checkpoint at load (as serve)");
    parser.add_option("load-format", "FORMAT", "auto (default) | safetensors | dummy: random weights (as serve)");
    parser.add_switch("fp8-activations",
                      "fp8 checkpoints with dynamic activation scales (and --quantization fp8): round each token's\n"
                      "inputs to fp8 before the product, as the checkpoint computes (W8A8); default: weight-only");
    if (auto exit = cli::parse_or_exit(parser, "logits", args)) return *exit;

    const auto dir = parser.get("model");
    if (!dir) return cli::fail("logits", "--model DIR is required");
    const auto ids_text = parser.get("ids");
    if (!ids_text) return cli::fail("logits", "--ids is required");
    auto ids = cli::parse_token_ids(*ids_text);
    if (!ids.ok()) return cli::fail("logits", "--ids: " + ids.message());
    if (ids->empty()) return cli::fail("logits", "--ids: no token ids given");
    size_t first = 0;
    if (auto last = parser.get("last")) {
        const int n = std::atoi(last->c_str());
        if (n <= 0) return cli::fail("logits", "--last: expected a positive count, got '" + *last + "'");
        first = ids->size() > static_cast<size_t>(n) ? ids->size() - static_cast<size_t>(n) : 0;
    }
    const std::string device = parser.get("device").value_or("cpu");
    std::unique_ptr<Backend> backend;
    if (device == "cuda") {
        auto cuda = make_cuda_backend();
        if (!cuda.ok()) return cli::fail("logits", cuda.message());
        backend = std::move(cuda).value();
    } else if (device == "cpu") {
        CpuBackendOptions options;
        if (auto threads = parser.get("threads")) options.num_threads = std::atoi(threads->c_str());
        backend = make_cpu_backend(options);
    } else {
        return cli::fail("logits", "--device: '" + device + "' is not cpu or cuda");
    }
    model::LoadOptions load;
    load.quantization = parser.get("quantization").value_or("");
    load.fp8_activations = parser.has("fp8-activations");
    if (auto v = parser.get("load-format")) {
        auto dummy = model::parse_load_format(*v);
        if (!dummy.ok()) return cli::fail("logits", dummy.message());
        load.dummy_weights = *dummy;
    }
    auto model = model::Model::load(*dir, *backend, single_communicator(), load);
    if (!model.ok()) return cli::fail("logits", model.message());
    auto runner = model::SequenceRunner::create(**model, 1, static_cast<int32_t>(ids->size()));
    if (!runner.ok()) return cli::fail("logits", runner.message());
    if (parser.has("hidden") && !parser.has("json")) return cli::fail("logits", "--hidden needs --json");
    // The printed positions' rows of each layer's residual stream (a host copy: the observer reads host memory).
    std::vector<std::vector<float>> hidden;
    model::HiddenObserver observer;
    if (parser.has("hidden")) {
        observer = [&](int64_t, const Tensor& h) {
            const int64_t H = h.dim(1);
            std::vector<float>& rows = hidden.emplace_back();
            for (size_t t = first; t < ids->size(); ++t) {
                const float* row = h.data_as<float>() + static_cast<int64_t>(t) * h.stride(0);
                rows.insert(rows.end(), row, row + H);
            }
        };
    }
    auto logits = runner->feed(0, *ids, /*all_logits=*/true, observer);
    if (!logits.ok()) return cli::fail("logits", logits.message());

    const int64_t V = runner->vocab_size();
    std::string out;
    if (parser.has("json")) {
        out.reserve(static_cast<size_t>(logits->size()) * 12);
        const size_t rows = ids->size() - first;
        out += "{\"logits\":";
        append_rows(out, logits->data() + first * V, rows, static_cast<size_t>(V));
        if (!hidden.empty()) {
            out += ",\"hidden\":[";
            for (size_t l = 0; l < hidden.size(); ++l) {
                if (l) out += ',';
                append_rows(out, hidden[l].data(), rows, hidden[l].size() / rows);
            }
            out += ']';
        }
        out += "}\n";
    } else {
        for (size_t t = first; t < ids->size(); ++t) {
            const float* row = logits->data() + t * V;
            std::vector<int32_t> top;
            for (int k = 0; k < 5 && k < V; ++k) {
                int32_t best = -1;
                for (int32_t v = 0; v < V; ++v) {
                    if (std::find(top.begin(), top.end(), v) != top.end()) continue;
                    if (best < 0 || row[v] > row[best]) best = v;
                }
                top.push_back(best);
            }
            out += "position " + std::to_string(t) + " (token " + std::to_string((*ids)[t]) + "):";
            for (int32_t v : top) {
                out += " " + std::to_string(v) + "=";
                append_float(out, row[v]);
            }
            out += '\n';
        }
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

}  // namespace

PAGODA_COMMAND("logits", "print the logits of every position of a token sequence", run_logits);
