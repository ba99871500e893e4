// A small HTTP/1.1 server: keep-alive, size limits, timeouts, streaming responses (SSE) and graceful shutdown.
// Boost.Beast/Asio live behind this interface (http_server.cpp); handlers only see the plain types below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "server/http/ip_allowlist.h"

namespace pagoda::server::http {

using Headers = std::vector<std::pair<std::string, std::string>>;  // names as received; lookups ignore case

// Case-insensitive header lookup; nullptr when absent.
const std::string* find_header(const Headers& headers, std::string_view name);

// What a handler knows about its request that the access log line carries (the HTTP layer adds the rest). Written
// on the connection's strand or before the answer is sent. The line is written when the last holder lets go (the
// connection once the answer ended, or the handler's work when it outlives a client that hung up, so that its token
// counts are known).
struct RequestNotes {
    std::string tenant, model;
    int64_t prompt_tokens = -1, completion_tokens = -1;
    double ttft_s = -1.0;

    std::function<void(const RequestNotes&)> on_release;  // set by the HTTP layer
    RequestNotes() = default;
    RequestNotes(const RequestNotes&) = delete;
    RequestNotes& operator=(const RequestNotes&) = delete;
    ~RequestNotes() {
        if (on_release) on_release(*this);
    }
};

struct Request {
    std::string method;  // "GET", "POST", ...
    std::string target;  // "/v1/models?x=1"
    std::string path;    // target without the query string
    Headers headers;
    std::string body;
    std::string remote;                   // peer address, for logs
    std::shared_ptr<RequestNotes> notes;  // null unless an access log is written
};

struct Response {
    int status = 200;
    Headers headers;  // Content-Length, Connection and Server are set by the server
    std::string body;
    std::string content_type = "application/json";
};

// The reply side of one request. Thread-safe: any method may be called from any thread, but a handler that stays on
// the I/O thread should prefer post() for work that follows an event from another thread, so that the work runs
// serialized with the connection. Exactly one of send() or start_stream() ... finish() completes a request; a
// Responder dropped without either answers 500, so that a bug never leaves a client hanging.
class Responder {
  public:
    virtual ~Responder() = default;

    // A complete response.
    virtual void send(Response response) = 0;

    // A streamed response without Content-Length (the connection closes after it, or chunked for keep-alive).
    virtual void start_stream(int status, std::string content_type, Headers headers = {}) = 0;
    // Queues bytes of a streamed response; false when the client is gone (nothing is written then).
    virtual bool write(std::string data) = 0;
    // Ends the streamed response.
    virtual void finish() = 0;

    // Bytes queued but not yet written to the socket (a slow client makes this grow).
    virtual size_t pending_bytes() const = 0;
    // True once the peer closed the connection or a write failed.
    virtual bool closed() const = 0;
    // Called once, on an I/O thread, when the peer closes the connection before the response was finished
    // (disconnect = cancel). Set it before starting long work; it fires at once when the peer is already gone.
    virtual void on_close(std::function<void()> callback) = 0;
    // Runs `fn` on this connection's strand (never inline), e.g. to react to an engine notification.
    virtual void post(std::function<void()> fn) = 0;
};

using Handler = std::function<void(Request request, std::shared_ptr<Responder> responder)>;

class AccessLog;  // access_log.h

// TLS in the server itself (vLLM's --ssl-* flags); no certificate file = plain HTTP.
struct TlsOptions {
    std::string certfile;  // PEM: the server's certificate, then its chain
    std::string keyfile;   // PEM private key
    std::string ca_certs;  // PEM: the CAs that client certificates must chain to
    int cert_reqs = 0;     // client certificates, as Python's ssl: 0 none, 1 optional (checked if sent), 2 required
    bool enabled() const { return !certfile.empty(); }
};

struct ServerOptions {
    std::string host = "127.0.0.1";
    uint16_t port = 8000;  // 0 = any free port (see Server::port())
    int num_threads = 2;   // I/O threads
    size_t max_header_bytes = 16 * 1024;
    size_t max_body_bytes = 32 * 1024 * 1024;
    int read_timeout_s = 60;      // to receive one whole request (slow-drip clients are cut off)
    int idle_timeout_s = 60;      // between keep-alive requests
    int write_timeout_s = 300;    // a client that reads nothing for this long is dropped
    int shutdown_timeout_s = 30;  // in-flight requests get this long after SIGINT/SIGTERM
    bool handle_signals = true;   // SIGINT/SIGTERM start a graceful shutdown; a second signal ends the wait
                                  // (once the Server is destroyed, SIGINT/SIGTERM/SIGHUP are ignored: exiting)
    TlsOptions tls;
    IpAllowList allowed_ips;                    // empty: every peer
    std::shared_ptr<AccessLog> access_log;      // null: none
    std::function<void(int status)> on_status;  // each answer's status, on an I/O thread (for /metrics); may be empty
};

class Server {
  public:
    // Binds and listens (so port() is valid at once); serving starts with run().
    static Result<std::unique_ptr<Server>> create(const ServerOptions& options, Handler handler);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    uint16_t port() const;
    // Serves until shutdown completes; runs the I/O threads (the caller's thread is one of them).
    void run();
    // Any thread: lets in-flight requests finish (up to shutdown_timeout_s) while new ones are still accepted, for
    // the handler to refuse (on_shutdown tells it when), then closes everything and run() returns.
    void shutdown();
    // Called (once, on an I/O thread) when a graceful shutdown begins, e.g. to make /health answer 503.
    void on_shutdown(std::function<void()> callback);
    // Called on an I/O thread for each SIGHUP (with handle_signals): re-read files, reopen logs.
    void on_reload(std::function<void()> callback);
    // Requests accepted (before a shutdown began) whose response has not finished.
    int64_t in_flight() const;

    struct Impl;

  private:
    explicit Server(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::server::http
