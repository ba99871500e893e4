// POST /v1/embeddings, as OpenAI's and vLLM's: input as a string, a list of strings, a list of token ids or a list of
// such lists; one prompt-only engine request per input (last-token pooling: the final-norm hidden state of the last
// token, as Qwen3-Embedding's sentence-transformers Pooling module takes it), then the optional Matryoshka cut to
// `dimensions` and L2 normalisation; float arrays or base64 of little-endian float32.
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>

#include "server/openai/json_fields.h"
#include "server/openai/pooling_job.h"
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

namespace {

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit per request

struct EmbeddingRequest {
    std::string model;
    std::vector<Prompt> inputs;
    bool base64 = false;
    std::optional<int64_t> dimensions;
    bool add_special_tokens = true;  // vLLM's extra; the tokenizer's template (Qwen3-Embedding: <|endoftext|> last)
    std::optional<int64_t> truncate_prompt_tokens;  // vLLM's extra: keep the last N tokens (-1: max_model_len)
};

std::optional<ApiError> parse_embedding_request(const Json& body, EmbeddingRequest& out) {
    Fields f(body);
    if (auto v = f.string("model")) out.model = *v;
    parse_prompt_list(f, "input", out.inputs);
    if (auto v = f.string("encoding_format")) {
        if (*v == "base64")
            out.base64 = true;
        else if (*v != "float")
            f.fail("'encoding_format' must be \"float\" or \"base64\", got \"" + *v + "\"", "encoding_format");
    }
    out.dimensions = f.integer("dimensions", 1, std::numeric_limits<int32_t>::max());
    if (auto v = f.boolean("add_special_tokens")) out.add_special_tokens = *v;
    out.truncate_prompt_tokens = f.integer("truncate_prompt_tokens", -1, std::numeric_limits<int32_t>::max());
    if (out.truncate_prompt_tokens == 0)
        f.fail("'truncate_prompt_tokens' must be -1 (the model's context) or a positive number of tokens",
               "truncate_prompt_tokens");
    (void)f.string("user");
    if (!f.failed() && out.inputs.size() > kMaxInputs)
        f.fail("'input' may hold at most " + std::to_string(kMaxInputs) + " items, got " +
                   std::to_string(out.inputs.size()),
               "input");
    return f.error;
}

// The first `dims` values scaled to unit length (torch's F.normalize: divided by max(norm, 1e-12)).
void truncate_and_normalize(std::vector<float>& v, size_t dims) {
    v.resize(std::min(v.size(), dims));
    double sum = 0.0;
    for (float x : v)
        sum += static_cast<double>(x) * x;
    const double scale = 1.0 / std::max(std::sqrt(sum), 1e-12);
    for (float& x : v)
        x = static_cast<float>(x * scale);
}

void append_base64(std::string& out, const unsigned char* data, size_t n) {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t b = (uint32_t{data[i]} << 16) | (i + 1 < n ? uint32_t{data[i + 1]} << 8 : 0) |
                           (i + 2 < n ? uint32_t{data[i + 2]} : 0);
        out += kAlphabet[(b >> 18) & 63];
        out += kAlphabet[(b >> 12) & 63];
        out += i + 1 < n ? kAlphabet[(b >> 6) & 63] : '=';
        out += i + 2 < n ? kAlphabet[b & 63] : '=';
    }
}

// The vector as the client asked for it: a JSON array of floats (each in the shortest form that reads back as the
// same float32), or a JSON string of base64 over its little-endian float32 bytes (what the openai SDK decodes).
void append_embedding(std::string& out, const std::vector<float>& v, bool base64) {
    if (base64) {
        static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian float32");
        out += '"';
        append_base64(out, reinterpret_cast<const unsigned char*>(v.data()), v.size() * sizeof(float));
        out += '"';
        return;
    }
    out += '[';
    char buf[32];
    for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out += ',';
        const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v[i]);
        out.append(buf, end);
    }
    out += ']';
}

}  // namespace

void handle_embeddings(ServiceContext& ctx, Exchange x) {
    if (auto err = check_task(ctx, ModelTask::kEmbed, "/v1/embeddings")) return send_error(x, *err);
    auto body = parse_json_body(x);
    if (!body) return;
    EmbeddingRequest er;
    if (auto err = parse_embedding_request(*body, er)) return send_error(x, *err);
    if (!serves_model(*x.model, er.model)) return send_error(x, unknown_model(er.model));
    if (auto err = check_tenant_model(ctx, x, er.model)) return send_error(x, *err);
    const int32_t hidden = x.model->pooling.hidden_size;
    if (er.dimensions && hidden > 0 && *er.dimensions > hidden)
        return send_error(x, ApiError::bad_request("'dimensions' is " + std::to_string(*er.dimensions) +
                                                       "; this model's embeddings have " + std::to_string(hidden),
                                                   "dimensions"));
    std::vector<engine::Request> requests(er.inputs.size());
    for (size_t i = 0; i < er.inputs.size(); ++i) {
        const std::string where = er.inputs.size() == 1 ? "input" : "input[" + std::to_string(i) + "]";
        if (auto err = pooling_prompt_tokens(*x.model, er.inputs[i], er.add_special_tokens, er.truncate_prompt_tokens,
                                             where, requests[i].prompt_tokens))
            return send_error(x, *err);
        requests[i].pooling = engine::PoolingTask::kLastHidden;
    }
    const std::string model = er.model.empty() ? x.model->served_model_names.front() : er.model;
    const int64_t created = unix_seconds();
    PoolingJob::start(
        std::move(x), std::move(requests),
        [er = std::move(er), model, created](const Exchange& x, PooledOutputs& outputs) {
            std::string body = "{\"id\":\"" + random_id("embd-") +
                               "\",\"object\":\"list\",\"created\":" + std::to_string(created) +
                               ",\"model\":" + Json(model).dump() + ",\"data\":[";
            for (size_t i = 0; i < outputs.vectors.size(); ++i) {
                std::vector<float>& v = outputs.vectors[i];
                if (er.dimensions && static_cast<size_t>(*er.dimensions) > v.size())
                    return send_error(
                        x, ApiError::bad_request("'dimensions' is " + std::to_string(*er.dimensions) +
                                                     "; this model's embeddings have " + std::to_string(v.size()),
                                                 "dimensions"));
                truncate_and_normalize(v, er.dimensions ? static_cast<size_t>(*er.dimensions) : v.size());
                for (float f : v)
                    if (!std::isfinite(f))
                        return send_error(
                            x, ApiError{500, "the model produced a non-finite embedding", "InternalServerError", ""});
                body += i > 0 ? ",{" : "{";
                body += "\"object\":\"embedding\",\"index\":" + std::to_string(i) + ",\"embedding\":";
                append_embedding(body, v, er.base64);
                body += '}';
            }
            const std::string tokens = std::to_string(outputs.prompt_tokens);
            body += "],\"usage\":{\"prompt_tokens\":" + tokens + ",\"total_tokens\":" + tokens + "}}";
            send_json(x, 200, std::move(body));
        });
}

}  // namespace pagoda::server::openai
