// What `pagoda serve` needs in production beyond serving: the access log, TLS, the client address allow-list, the
// tenants' key file (and SIGHUP to re-read it), and systemd's readiness and watchdog notifications. Kept apart from
// cmd_serve.cpp, which holds the flag table and calls in here.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "common/status.h"
#include "server/auth/tenants.h"
#include "server/http/http_server.h"
#include "server/openai/service.h"
#include "server/ops/systemd_notify.h"

namespace pagoda::cli {

// --access-log, --ssl-keyfile, --ssl-certfile, --ssl-ca-certs, --ssl-cert-reqs, --allowed-ips, --api-keys-file.
void add_serve_ops_flags(ArgParser& p);

// Reads and checks them: the access log is opened, the key file read (an error names the file and the entry);
// certificates are loaded when the server is created. `allowed_ips` is --allowed-ips as a list.
Status serve_ops_options_from(const ArgParser& p, const std::vector<std::string>& allowed_ips,
                              server::http::ServerOptions& http, server::openai::ServiceConfig& service,
                              std::string& api_keys_file);

Result<std::vector<server::auth::TenantSpec>> read_tenants_file(const std::string& path);

// SIGHUP: the key file is read again (a file that does not parse keeps the current table, and the log says why) and
// the access log is reopened (after logrotate moved it).
void reload_on_sighup(const std::string& api_keys_file, server::openai::OpenAiService& service,
                      server::http::AccessLog* access_log);

// systemd, when it started us as Type=notify: READY=1 with the model ready, STOPPING=1 at the drain, STATUS= lines,
// and the watchdog's keep-alives from then on. Does nothing without $NOTIFY_SOCKET.
class SystemdLink {
  public:
    SystemdLink();
    ~SystemdLink();
    void status(const std::string& text);
    // `probe` returns once the engine loop has turned (the watchdog's proof of life); it must stay valid until
    // stop_watchdog().
    void ready(std::function<void()> probe);
    void stopping();
    void stop_watchdog();

  private:
    std::unique_ptr<server::ops::SystemdNotifier> notifier_;
    std::unique_ptr<server::ops::SystemdWatchdog> watchdog_;
    std::mutex mu_;  // ready() runs on the model-loading thread, stop_watchdog() on the main one
};

}  // namespace pagoda::cli
