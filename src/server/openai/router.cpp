// Router: CORS, API keys, refusals while loading or draining, and the method check, in that order, then the route.
#include "server/openai/router.h"

#include <algorithm>
#include <cmath>

#include "common/log.h"
#include "server/http/request_id.h"

namespace pagoda::server::openai {

namespace {

bool contains(const std::vector<std::string>& list, std::string_view s) {
    return std::find(list.begin(), list.end(), s) != list.end();
}

std::string join(const std::vector<std::string>& items) {
    std::string s;
    for (const auto& x : items)
        s += (s.empty() ? "" : ", ") + x;
    return s;
}

}  // namespace

void send_json(const std::shared_ptr<http::Responder>& r, int status, std::string body, http::Headers headers) {
    r->send(http::Response{status, std::move(headers), std::move(body), "application/json"});
}

void log_request_event(const http::Headers& headers, const std::string& what) {
    const std::string* id = http::find_header(headers, "x-request-id");
    PAGODA_LOG_INFO("request " + (id ? *id : std::string("-")) + ": " + what);
}

void send_error(const std::shared_ptr<http::Responder>& r, const ApiError& e, http::Headers headers) {
    if (e.status >= 400 && e.status < 500)
        log_request_event(headers, std::to_string(e.status) + " " + e.message +
                                       (e.param.empty() ? std::string() : " (param " + e.param + ")"));
    send_json(r, e.status, error_body(e), std::move(headers));
}

std::optional<Json> parse_json_body(const Exchange& x) {
    auto body = Json::parse(x.request.body);
    if (!body.ok()) {
        send_error(x, ApiError::bad_request("the request body is not valid JSON: " + body.message()));
        return std::nullopt;
    }
    if (!body->is_object()) {
        send_error(x, ApiError::bad_request("the request body must be a JSON object"));
        return std::nullopt;
    }
    return std::move(body).value();
}

Router::Router(RouterOptions options, std::vector<Route> routes, const std::atomic<bool>& ready,
               const std::atomic<bool>& draining)
    : options_(std::move(options)), routes_(std::move(routes)), ready_(ready), draining_(draining) {}

bool Router::apply_cors(const http::Request& req, const std::shared_ptr<http::Responder>& r,
                        http::Headers& extra) const {
    const std::string* origin = http::find_header(req.headers, "origin");
    const bool any_origin = contains(options_.allowed_origins, "*");
    if (!origin || !(any_origin || contains(options_.allowed_origins, *origin))) return false;
    extra.emplace_back("Access-Control-Allow-Origin",
                       any_origin && !options_.allow_credentials ? std::string("*") : *origin);
    if (!any_origin || options_.allow_credentials) extra.emplace_back("Vary", "Origin");
    if (options_.allow_credentials) extra.emplace_back("Access-Control-Allow-Credentials", "true");
    if (req.method != "OPTIONS" || !http::find_header(req.headers, "access-control-request-method")) return false;
    // A preflight needs no API key and reaches no route.
    extra.emplace_back("Access-Control-Allow-Methods", contains(options_.allowed_methods, "*")
                                                           ? "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"
                                                           : join(options_.allowed_methods));
    const std::string* req_headers = http::find_header(req.headers, "access-control-request-headers");
    if (contains(options_.allowed_headers, "*")) {
        if (req_headers) extra.emplace_back("Access-Control-Allow-Headers", *req_headers);
    } else {
        extra.emplace_back("Access-Control-Allow-Headers", join(options_.allowed_headers));
    }
    extra.emplace_back("Access-Control-Max-Age", "600");
    r->send(http::Response{200, std::move(extra), "OK", "text/plain"});
    return true;
}

ApiError rate_limited(Exchange& x, double wait_s, std::string_view limit) {
    const auto seconds = static_cast<int64_t>(std::ceil(std::max(wait_s, 1.0)));
    x.headers.emplace_back("Retry-After", std::to_string(seconds));
    return ApiError{429,
                    "tenant " + (x.tenant ? x.tenant->spec.name : std::string("-")) + " is over its " +
                        std::string(limit) + " limit; retry in " + std::to_string(seconds) + " s",
                    "RateLimitError", ""};
}

bool Router::authenticate(Exchange& x) const {
    const http::Request& req = x.request;
    if (!options_.tenants || !options_.tenants->enabled() || req.path.rfind(options_.auth_prefix, 0) != 0 ||
        req.method == "OPTIONS")
        return true;
    const std::string* auth = http::find_header(req.headers, "authorization");
    if (auth && auth->size() > 7 && (auth->compare(0, 7, "Bearer ") == 0 || auth->compare(0, 7, "bearer ") == 0))
        x.tenant = options_.tenants->find(std::string_view(*auth).substr(7));
    if (!x.tenant) {
        x.headers.emplace_back("WWW-Authenticate", "Bearer");
        send_error(x, ApiError::unauthorized());
        return false;
    }
    if (x.request.notes) x.request.notes->tenant = x.tenant->spec.name;
    if (const double wait = x.tenant->admit_request(); wait > 0.0) {
        send_error(x, rate_limited(x, wait, "requests_per_minute"));
        return false;
    }
    return true;
}

void Router::dispatch(http::Request req, std::shared_ptr<http::Responder> r) const {
    Exchange x{std::move(req), std::move(r), {}, {}, {}, {}};
    x.request_id = http::request_id_for(x.request.headers);
    x.headers.emplace_back("X-Request-Id", x.request_id);
    if (apply_cors(x.request, x.responder, x.headers)) return;
    if (!authenticate(x)) return;

    const std::string& path = x.request.path;
    std::vector<const Route*> at_path;
    for (const Route& route : routes_) {
        const bool match =
            route.prefix ? path.size() > route.path.size() && path.rfind(route.path, 0) == 0 : route.path == path;
        if (match) at_path.push_back(&route);
    }
    auto any = [&](bool Route::*flag) {
        return std::any_of(at_path.begin(), at_path.end(), [&](const Route* route) { return route->*flag; });
    };
    // Shutting down: nothing new starts (a load balancer retries elsewhere); /metrics stays up for the last scrape.
    if (draining_.load() && !any(&Route::open_while_draining))
        return send_error(x, ApiError::unavailable("the server is shutting down"));
    if (at_path.empty()) return send_error(x, ApiError::not_found("no route for " + x.request.method + " " + path));
    if (any(&Route::needs_model) && !ready_.load())
        return send_error(x, ApiError::unavailable("the model is still loading; retry when /health answers 200"));

    std::vector<std::string> allowed;
    for (const Route* route : at_path) {
        if (x.request.method == route->method || (route->method == "GET" && x.request.method == "HEAD")) {
            if (route->admin_only && x.tenant && !x.tenant->spec.admin)
                return send_error(x, ApiError{403, "tenant " + x.tenant->spec.name + " is not an admin",
                                              "PermissionDeniedError", ""});
            return route->handler(std::move(x));
        }
        allowed.push_back(route->method);
    }
    x.headers.emplace_back("Allow", join(allowed));
    send_error(x, ApiError{405, "method " + x.request.method + " is not allowed on " + path, "MethodNotAllowed", ""});
}

}  // namespace pagoda::server::openai
