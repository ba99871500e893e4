// The route table of the OpenAI-compatible API: method + path -> handler. CORS, API keys, the draining and loading
// refusals and the method check are applied here, once, before any handler runs; handlers see the request, a
// Responder and the headers every answer must carry, never the HTTP library.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "server/auth/tenants.h"
#include "server/http/http_server.h"
#include "server/openai/protocol.h"

namespace pagoda::server::openai {

struct ServedModel;  // model_holder.h

// One request and the way to answer it.
struct Exchange {
    http::Request request;
    std::shared_ptr<http::Responder> responder;
    http::Headers headers;   // sent with every answer: X-Request-Id, CORS
    std::string request_id;  // the X-Request-Id (the client's, sanitised, or a fresh one); logs name it
    std::shared_ptr<const auth::Tenant> tenant;  // whose key authenticated it; null when no key was needed
    // The model it runs on, taken when its handler starts and held until the answer is done (model_holder.h).
    std::shared_ptr<const ServedModel> model;
};

// 429 for a tenant over `limit` ("requests_per_minute", "tokens_per_minute"): adds Retry-After (whole seconds,
// rounded up) to the exchange's headers.
ApiError rate_limited(Exchange& x, double wait_s, std::string_view limit);

void send_json(const std::shared_ptr<http::Responder>& r, int status, std::string body, http::Headers headers);
// A 4xx is also logged at info level, with the X-Request-Id found in `headers` and the reason.
void send_error(const std::shared_ptr<http::Responder>& r, const ApiError& e, http::Headers headers);
// The info-level line of a refused (4xx) or aborted request: "request ID: WHAT".
void log_request_event(const http::Headers& headers, const std::string& what);
inline void send_json(const Exchange& x, int status, std::string body) {
    send_json(x.responder, status, std::move(body), x.headers);
}
inline void send_error(const Exchange& x, const ApiError& e) {
    send_error(x.responder, e, x.headers);
}

// The body as a JSON object, or nullopt after answering 400.
std::optional<Json> parse_json_body(const Exchange& x);

using RouteHandler = std::function<void(Exchange exchange)>;

struct Route {
    std::string method;  // a GET route answers HEAD too
    std::string path;    // exact match, unless `prefix`
    RouteHandler handler;
    bool needs_model = false;          // 503 until the model is loaded
    bool open_while_draining = false;  // answered during a graceful shutdown (every other route: 503)
    bool prefix = false;      // `path` is a prefix: the route takes the longer paths under it (/v1/responses/{id})
    bool admin_only = false;  // with keys configured, only a tenant with "admin": true (else 403)
};

struct RouterOptions {
    std::shared_ptr<auth::TenantRegistry> tenants;  // the keys (--api-key, --api-keys-file); none: no auth
    std::string auth_prefix = "/v1";           // paths that need a key (health, metrics, tokenize stay open, as vLLM)
    std::vector<std::string> allowed_origins;  // CORS; "*" allows any
    std::vector<std::string> allowed_methods;
    std::vector<std::string> allowed_headers;
    bool allow_credentials = false;
};

class Router {
  public:
    // `ready` and `draining` are read on every request and must outlive the router.
    Router(RouterOptions options, std::vector<Route> routes, const std::atomic<bool>& ready,
           const std::atomic<bool>& draining);

    // The http::Handler.
    void dispatch(http::Request request, std::shared_ptr<http::Responder> responder) const;

  private:
    // CORS headers for an allowed origin; true when the request was a preflight and has been answered.
    bool apply_cors(const http::Request& req, const std::shared_ptr<http::Responder>& r, http::Headers& extra) const;
    // 401 and 429 answered here; on success x.tenant is set when the path needs a key.
    bool authenticate(Exchange& x) const;

    RouterOptions options_;
    std::vector<Route> routes_;
    const std::atomic<bool>& ready_;
    const std::atomic<bool>& draining_;
};

}  // namespace pagoda::server::openai
