// The production flags of `pagoda serve` and its systemd link (see serve_ops.h).
#include "cli/serve_ops.h"

#include "common/file.h"
#include "common/json.h"
#include "common/log.h"
#include "server/http/access_log.h"

namespace pagoda::cli {

void add_serve_ops_flags(ArgParser& p) {
    p.add_option("access-log", "PATH|-",
                 "one JSON line per request (time, request id, tenant, model, status, tokens, TTFT, duration, "
                 "client; never the key) appended to PATH, or stdout for '-' (default: off; reopened on SIGHUP)");
    p.add_option("ssl-certfile", "FILE", "serve HTTPS with this PEM certificate (chain after it)");
    p.add_option("ssl-keyfile", "FILE", "the certificate's PEM private key");
    p.add_option("ssl-ca-certs", "FILE", "PEM CA certificates that client certificates must chain to");
    p.add_option("ssl-cert-reqs", "N",
                 "client certificates: 0 not asked (default), 1 optional (checked if sent), 2 required");
    p.add_option("allowed-ips", "LIST",
                 "client networks answered (CIDR, IPv4/IPv6, JSON list or comma-separated); others get 403");
    p.add_option("api-keys-file", "FILE",
                 "tenants: JSON {\"tenants\": [{\"name\", \"keys\", \"models\", \"requests_per_minute\", "
                 "\"tokens_per_minute\", \"admin\"}]} (re-read on SIGHUP; with --api-key too)");
}

Result<std::vector<server::auth::TenantSpec>> read_tenants_file(const std::string& path) {
    auto text = read_file(path);
    if (!text.ok()) return text.status().with_context("--api-keys-file");
    auto specs = server::auth::parse_tenants_file(*text);
    if (!specs.ok()) return specs.status().with_context("--api-keys-file " + path);
    return specs;
}

Status serve_ops_options_from(const ArgParser& p, const std::vector<std::string>& allowed_ips,
                              server::http::ServerOptions& http, server::openai::ServiceConfig& service,
                              std::string& api_keys_file) {
    if (auto v = p.get("access-log")) {
        auto log = server::http::AccessLog::open(*v);
        if (!log.ok()) return log.status();
        http.access_log = std::move(log).value();
    }
    http.tls.certfile = p.get("ssl-certfile").value_or("");
    http.tls.keyfile = p.get("ssl-keyfile").value_or("");
    http.tls.ca_certs = p.get("ssl-ca-certs").value_or("");
    if (!http.tls.enabled() && (!http.tls.keyfile.empty() || !http.tls.ca_certs.empty() || p.has("ssl-cert-reqs")))
        return Status::error("--ssl-keyfile, --ssl-ca-certs and --ssl-cert-reqs need --ssl-certfile");
    if (auto v = p.get("ssl-cert-reqs")) {
        if (*v != "0" && *v != "1" && *v != "2")
            return Status::error("--ssl-cert-reqs: '" + *v + "' is not 0 (none), 1 (optional) or 2 (required)");
        http.tls.cert_reqs = std::stoi(*v);
    }
    if (!allowed_ips.empty()) {
        PAGODA_ASSIGN_OR_RETURN(http.allowed_ips, server::http::IpAllowList::parse(allowed_ips));
    }
    if (auto v = p.get("api-keys-file")) {
        api_keys_file = *v;
        PAGODA_ASSIGN_OR_RETURN(service.tenants, read_tenants_file(*v));
    }
    return ok_status();
}

void reload_on_sighup(const std::string& api_keys_file, server::openai::OpenAiService& service,
                      server::http::AccessLog* access_log) {
    PAGODA_LOG_INFO("SIGHUP: reloading");
    if (!api_keys_file.empty()) {
        auto specs = read_tenants_file(api_keys_file);
        if (!specs.ok()) {
            PAGODA_LOG_ERROR(specs.message() + "; keeping the tenants loaded before");
        } else {
            const size_t n = specs->size();
            if (Status s = service.reload_tenants(std::move(specs).value()); !s.ok()) {
                PAGODA_LOG_ERROR("--api-keys-file " + api_keys_file + ": " + s.message() +
                                 "; keeping the tenants loaded before");
            } else {
                PAGODA_LOG_INFO("--api-keys-file " + api_keys_file + ": " + std::to_string(n) + " tenant(s) loaded");
            }
        }
    }
    if (access_log) {
        if (Status s = access_log->reopen(); !s.ok()) PAGODA_LOG_ERROR(s.message());
    }
}

SystemdLink::SystemdLink() : notifier_(server::ops::SystemdNotifier::from_environment()) {}

SystemdLink::~SystemdLink() {
    stop_watchdog();
}

void SystemdLink::status(const std::string& text) {
    if (notifier_) notifier_->notify("STATUS=" + text);
}

void SystemdLink::ready(std::function<void()> probe) {
    if (!notifier_) return;
    notifier_->notify("READY=1\nSTATUS=serving");
    const auto timeout = server::ops::SystemdNotifier::watchdog_timeout_from_environment();
    std::lock_guard lock(mu_);
    if (timeout.count() > 0 && !watchdog_)
        watchdog_ = std::make_unique<server::ops::SystemdWatchdog>(*notifier_, timeout, std::move(probe));
}

void SystemdLink::stopping() {
    if (notifier_) notifier_->notify("STOPPING=1\nSTATUS=draining");
}

void SystemdLink::stop_watchdog() {
    std::lock_guard lock(mu_);
    watchdog_.reset();
}

}  // namespace pagoda::cli
