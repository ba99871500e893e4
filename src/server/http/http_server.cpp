// Boost.Beast/Asio behind server/http/http_server.h. Beast parses requests (limits, malformed input); responses are
// written as plain bytes (fixed-length or chunked) from a per-connection queue that merges what a slow client has
// not taken yet into one write. This is the only file that includes Boost: it compiles slowly, keep it the only one.
#include "server/http/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "common/json.h"
#include "common/log.h"
#include "server/http/access_log.h"
#include "server/http/request_id.h"

namespace pagoda::server::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

const std::string* find_header(const Headers& headers, std::string_view name) {
    for (const auto& [k, v] : headers) {
        if (k.size() != name.size()) continue;
        bool same = true;
        for (size_t i = 0; i < k.size() && same; ++i)
            same = std::tolower(static_cast<unsigned char>(k[i])) == std::tolower(static_cast<unsigned char>(name[i]));
        if (same) return &v;
    }
    return nullptr;
}

namespace {

const char* reason_phrase(int status) {
    switch (status) {
        case 100:
            return "Continue";
        case 200:
            return "OK";
        case 204:
            return "No Content";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 413:
            return "Payload Too Large";
        case 415:
            return "Unsupported Media Type";
        case 422:
            return "Unprocessable Entity";
        case 429:
            return "Too Many Requests";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 501:
            return "Not Implemented";
        case 503:
            return "Service Unavailable";
        default:
            return "Status";
    }
}

// Header values we write come from handlers; a CR or LF in them would split the response.
bool safe_header_text(std::string_view s) {
    return s.find_first_of("\r\n") == std::string_view::npos;
}

std::string status_line_and_headers(int status, std::string_view content_type, const Headers& headers,
                                    bool keep_alive) {
    std::string out;
    out.reserve(256);
    out += "HTTP/1.1 ";
    out += std::to_string(status);
    out += ' ';
    out += reason_phrase(status);
    out += "\r\nServer: pagoda/" PAGODA_VERSION "\r\n";
    if (!content_type.empty() && safe_header_text(content_type)) {
        out += "Content-Type: ";
        out += content_type;
        out += "\r\n";
    }
    for (const auto& [k, v] : headers) {
        if (!safe_header_text(k) || !safe_header_text(v) || k.empty()) continue;
        out += k;
        out += ": ";
        out += v;
        out += "\r\n";
    }
    out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    return out;
}

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* error_type(int status) {
    switch (status) {
        case 403:
            return "PermissionDeniedError";
        case 413:
            return "RequestTooLarge";
        default:
            return "BadRequestError";
    }
}

// A connection's byte stream: TCP, or TLS over TCP (--ssl-certfile). Beast's parser and Asio's writes take either
// through the two async_*_some calls; timeouts and socket options go to the TCP layer (lowest()).
class ConnectionStream {
  public:
    using executor_type = beast::tcp_stream::executor_type;

    ConnectionStream(tcp::socket socket, asio::ssl::context* tls) {
        if (tls) {
            tls_.emplace(std::move(socket), *tls);
        } else {
            tcp_.emplace(std::move(socket));
        }
    }

    executor_type get_executor() noexcept { return lowest().get_executor(); }
    beast::tcp_stream& lowest() { return tls_ ? tls_->next_layer() : *tcp_; }
    bool is_tls() const { return tls_.has_value(); }

    template <typename Handler>
    void async_handshake(Handler&& handler) {
        tls_->async_handshake(asio::ssl::stream_base::server, std::forward<Handler>(handler));
    }
    template <typename Handler>
    void async_shutdown(Handler&& handler) {
        tls_->async_shutdown(std::forward<Handler>(handler));
    }
    template <typename Buffers, typename Handler>
    void async_read_some(const Buffers& buffers, Handler&& handler) {
        if (tls_) return tls_->async_read_some(buffers, std::forward<Handler>(handler));
        tcp_->async_read_some(buffers, std::forward<Handler>(handler));
    }
    template <typename Buffers, typename Handler>
    void async_write_some(const Buffers& buffers, Handler&& handler) {
        if (tls_) return tls_->async_write_some(buffers, std::forward<Handler>(handler));
        tcp_->async_write_some(buffers, std::forward<Handler>(handler));
    }

  private:
    std::optional<beast::tcp_stream> tcp_;
    std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;
};

std::string error_body(std::string_view message, std::string_view type, int code) {
    Json err = Json::object();
    err.set("message", Json(message));
    err.set("type", Json(type));
    err.set("param", Json());
    err.set("code", Json(code));
    Json body = Json::object();
    body.set("error", std::move(err));
    return body.dump();
}

}  // namespace

class Session;

struct Server::Impl {
    ServerOptions options;
    Handler handler;
    std::shared_ptr<asio::io_context> ioc;  // sessions share it so it outlives every socket
    // The acceptor, the signal set and the shutdown timer are used by several I/O threads; Asio objects are not
    // thread-safe, so all three live on one strand and every handler of theirs runs on it, one at a time.
    asio::strand<asio::io_context::executor_type> control;
    tcp::acceptor acceptor;
    asio::signal_set signals;
    asio::steady_timer shutdown_timer;
    std::atomic<int64_t> in_flight{0};  // exchanges begun before a shutdown that have not finished
    std::atomic<bool> draining{false};
    std::atomic<bool> stop_waiting{false};  // a second signal: give up on the requests in flight
    std::chrono::steady_clock::time_point shutdown_deadline;
    std::mutex mu;  // guards sessions and shutdown_callback
    std::list<std::weak_ptr<Session>> sessions;
    std::list<std::weak_ptr<Session>> closing;  // sessions closed by shutdown
    std::chrono::steady_clock::time_point stop_deadline;
    std::function<void()> shutdown_callback;
    std::function<void()> reload_callback;  // SIGHUP; guarded by mu
    std::optional<asio::ssl::context> tls;  // set when serving HTTPS

    explicit Impl(const ServerOptions& o, Handler h, std::shared_ptr<asio::io_context> io)
        : options(o),
          handler(std::move(h)),
          ioc(std::move(io)),
          control(asio::make_strand(*ioc)),
          acceptor(control),
          signals(control),
          shutdown_timer(control) {}

    void do_accept();
    void begin_shutdown();
    void poll_shutdown();
    void wait_for_signal();
    void close_all_sessions();
    void wait_for_sessions_then_stop();
};

// One connection. All its state is touched only on its strand.
class Session : public std::enable_shared_from_this<Session> {
  public:
    Session(Server::Impl& server, std::shared_ptr<asio::io_context> ioc, tcp::socket socket)
        : server_(server),
          ioc_(std::move(ioc)),
          stream_(std::move(socket), server.tls ? &*server.tls : nullptr),
          watch_timer_(stream_.get_executor()) {
        error_code ec;
        auto ep = socket_().remote_endpoint(ec);
        if (!ec) {
            client_ = ep.address().to_string();
            remote_ = client_ + ":" + std::to_string(ep.port());
        }
        refused_ = !server_.options.allowed_ips.allows(client_);
    }

    void start() {
        asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
            if (!self->stream_.is_tls()) return self->read_request();
            // The handshake counts against the time to send the first request.
            self->stream_.lowest().expires_after(std::chrono::seconds(self->server_.options.read_timeout_s));
            self->stream_.async_handshake([self](error_code ec) {
                if (ec) {
                    // Not worth more than a debug line: port scanners and plain-HTTP clients end up here.
                    PAGODA_LOG_DEBUG("http: TLS handshake with " + self->remote_ + " failed: " + ec.message());
                    return self->close_socket();
                }
                self->read_request();
            });
        });
    }

    // --- called through Exchange (any thread) --------------------------------------------------------------
    template <typename Fn>
    void run_on_strand(Fn&& fn) {
        asio::post(stream_.get_executor(), std::forward<Fn>(fn));
    }

    void send(uint64_t exchange, Response response) {
        if (exchange != exchange_id_ || completed_) return;
        const bool keep = keep_alive_ && !server_.draining.load();
        note_answer(response.status, response.headers);
        std::string out = status_line_and_headers(response.status, response.content_type, response.headers, keep);
        out += "Content-Length: ";
        out += std::to_string(head_ ? 0 : response.body.size());
        out += "\r\n\r\n";
        if (!head_) out += response.body;
        keep_alive_ = keep;
        completed_ = true;
        enqueue(std::move(out));
    }

    void start_stream(uint64_t exchange, int status, const std::string& content_type, const Headers& headers) {
        if (exchange != exchange_id_ || completed_ || streaming_) return;
        // HTTP/1.0 has no chunked encoding: the body is sent raw and the connection's close ends it.
        const bool keep = keep_alive_ && !http10_ && !server_.draining.load();
        note_answer(status, headers);
        std::string out = status_line_and_headers(status, content_type, headers, keep);
        out += http10_ ? "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n\r\n"
                       : "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\nTransfer-Encoding: chunked\r\n\r\n";
        keep_alive_ = keep;
        streaming_ = true;
        enqueue(std::move(out));
    }

    void write_chunk(uint64_t exchange, std::string data) {
        if (exchange != exchange_id_ || completed_ || !streaming_ || data.empty()) return;
        if (http10_) return enqueue(std::move(data));
        char size[24];
        const int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
        std::string out;
        out.reserve(static_cast<size_t>(n) + data.size() + 2);
        out.append(size, static_cast<size_t>(n));
        out += data;
        out += "\r\n";
        enqueue(std::move(out));
    }

    void finish(uint64_t exchange) {
        if (exchange != exchange_id_ || completed_) return;
        if (!streaming_) {
            // finish() without start_stream(): answer an empty 200 rather than leave the client waiting.
            send(exchange, Response{200, {}, "", ""});
            return;
        }
        end_stream();
    }

    void set_on_close(uint64_t exchange, std::function<void()> callback) {
        if (exchange != exchange_id_) return;
        if (peer_closed_) {
            if (callback) callback();
            return;
        }
        on_close_ = std::move(callback);
    }

    void end_stream() {
        completed_ = true;
        if (!http10_) return enqueue("0\r\n\r\n");
        // HTTP/1.0: closing the connection ends the body, and nothing is queued to say so. When every chunk is already
        // written no write completion follows to notice the end: finish the response here (it hung the connection
        // until the server's shutdown, ~1 run in 8 of StreamToAnHttp10ClientIsRawAndEndsWithTheConnection).
        if (!writing_) write_next();
    }

    void abandon(uint64_t exchange) {  // the handler dropped its Responder without answering
        if (exchange != exchange_id_ || completed_) return;
        if (streaming_) return end_stream();
        PAGODA_LOG_ERROR("http: a handler for " + target_ + " returned no response");
        send(exchange, Response{500, {}, error_body("the server produced no response", "InternalServerError", 500)});
    }

    std::atomic<size_t> pending_bytes{0};
    std::atomic<bool> closed{false};

    void close_now() {
        asio::post(stream_.get_executor(), [self = shared_from_this()] { self->close_socket(); });
    }

  private:
    void read_request() {
        if (closed.load()) return;
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
        parser_->body_limit(server_.options.max_body_bytes);
        stream_.lowest().expires_after(
            std::chrono::seconds(first_request_ ? server_.options.read_timeout_s : server_.options.idle_timeout_s));
        bhttp::async_read_header(stream_, buffer_, *parser_,
                                 [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
    }

    void on_header(error_code ec) {
        if (ec) return on_read_error(ec);
        first_request_ = false;
        if (refused_) return reply_and_close(403, "the client address " + client_ + " is not in --allowed-ips");
        stream_.lowest().expires_after(std::chrono::seconds(server_.options.read_timeout_s));
        auto& req = parser_->get();
        auto expect = req.find(bhttp::field::expect);
        if (expect != req.end() && beast::iequals(expect->value(), "100-continue") && !parser_->is_done()) {
            enqueue("HTTP/1.1 100 Continue\r\n\r\n");
        }
        bhttp::async_read(stream_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec2, size_t) { self->on_body(ec2); });
    }

    void on_read_error(error_code ec) {
        if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::operation_aborted ||
            ec == asio::error::connection_reset) {
            return close_socket();
        }
        // A timed-out tcp_stream has already closed the socket: a slow-drip or idle client is simply cut off.
        if (ec == beast::error::timeout) return close_socket();
        // TLS: a peer that closed without close_notify, or bytes that do not decrypt; nothing to answer.
        if (ec == asio::ssl::error::stream_truncated || ec.category() == asio::error::get_ssl_category())
            return close_socket();
        if (ec == bhttp::error::body_limit) {
            return reply_and_close(
                413, "request body larger than " + std::to_string(server_.options.max_body_bytes) + " bytes");
        }
        if (ec == bhttp::error::header_limit) return reply_and_close(431, "request headers too large");
        return reply_and_close(400, "malformed HTTP request: " + ec.message());
    }

    // A request refused before it reached the handler (too large, malformed) still gets an X-Request-Id (the
    // client's, when its headers were read) and one log line, as every 4xx answer does.
    void reply_and_close(int status, const std::string& message) {
        keep_alive_ = false;
        close_after_write_ = true;
        const std::string* sent = nullptr;
        std::string sent_value;
        if (status == 413 && parser_) {
            auto it = parser_->get().find("x-request-id");
            if (it != parser_->get().end()) sent = &(sent_value = std::string(it->value()));
        }
        const std::string id = request_id_for(sent);
        PAGODA_LOG_INFO("request " + id + ": " + std::to_string(status) + " " + message);
        if (server_.options.on_status) server_.options.on_status(status);
        if (server_.options.access_log) {
            AccessRecord r;
            r.time_unix = unix_now();
            r.request_id = id;
            if (parser_ && parser_->is_header_done()) {
                r.method = std::string(parser_->get().method_string());
                r.path = std::string(parser_->get().target().substr(0, parser_->get().target().find('?')));
            }
            r.client = client_;
            r.status = status;
            server_.options.access_log->write(r);
        }
        std::string body = error_body(message, error_type(status), status);
        std::string out = status_line_and_headers(status, "application/json", {{"X-Request-Id", id}}, false);
        out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        enqueue(std::move(out));
    }

    void on_body(error_code ec);

    void watch_for_disconnect() {
        if (stream_.is_tls()) return watch_tls_peer(exchange_id_);
        // While a request is being handled nothing reads the socket; wait for readability and peek: end of stream
        // means the client went away (cancel its work), data means it pipelined another request (stop watching).
        socket_().async_wait(tcp::socket::wait_read, [self = shared_from_this(), id = exchange_id_](error_code ec) {
            self->on_readable(ec, id);
        });
    }

    void on_readable(error_code ec, uint64_t id) {
        if (id != exchange_id_ || completed_ || closed.load()) return;
        if (ec == asio::error::operation_aborted) return;
        if (!ec) {
            char c;
            const ssize_t n = ::recv(socket_().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
            if (n > 0) return;  // pipelined bytes: read after this response
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return watch_for_disconnect();
        }
        peer_gone();
    }

    // Over TLS the bytes that arrive (a close_notify alert, encrypted like data) cannot be told from a pipelined
    // request without decrypting them, so the TCP state is polled instead: once the peer has sent its FIN (or reset)
    // the connection is no longer ESTABLISHED.
    void watch_tls_peer(uint64_t id) {
        watch_timer_.expires_after(std::chrono::milliseconds(500));
        watch_timer_.async_wait([self = shared_from_this(), id](error_code ec) {
            if (ec || id != self->exchange_id_ || self->completed_ || self->closed.load()) return;
            tcp_info info{};
            socklen_t len = sizeof(info);
            if (::getsockopt(self->socket_().native_handle(), IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
                info.tcpi_state != TCP_ESTABLISHED)
                return self->peer_gone();
            self->watch_tls_peer(id);
        });
    }

    void peer_gone() {
        if (peer_closed_) return;
        peer_closed_ = true;
        closed.store(true);
        fire_on_close();
        close_socket();
    }

    void fire_on_close() {
        if (!on_close_) return;
        auto cb = std::move(on_close_);
        on_close_ = nullptr;
        if (!completed_) cb();
    }

    void enqueue(std::string bytes) {
        if (closed.load()) return;
        pending_bytes.fetch_add(bytes.size());
        queue_.push_back(std::move(bytes));
        if (!writing_) write_next();
    }

    void write_next() {
        if (queue_.empty()) {
            writing_ = false;
            if (completed_ && !response_done_) {
                on_response_done();
            } else if (close_after_write_) {
                close_gracefully();
            }
            return;
        }
        writing_ = true;
        // Merge everything queued into one write (a slow client costs one buffer, not one per token).
        out_.clear();
        if (queue_.size() == 1) {
            out_ = std::move(queue_.front());
        } else {
            for (auto& q : queue_)
                out_ += q;
        }
        queue_.clear();
        stream_.lowest().expires_after(std::chrono::seconds(server_.options.write_timeout_s));
        asio::async_write(stream_, asio::buffer(out_), [self = shared_from_this()](error_code ec, size_t n) {
            self->pending_bytes.fetch_sub(self->out_.size());
            if (ec) return self->peer_gone();
            (void)n;
            self->write_next();
        });
    }

    void on_response_done() {
        response_done_ = true;
        log_access(true);
        uncount();
        on_close_ = nullptr;
        stream_.lowest().expires_never();
        if (!keep_alive_ || server_.draining.load()) return close_gracefully();
        // Stop the disconnect watcher before reading the next request.
        error_code ignored;
        socket_().cancel(ignored);
        asio::post(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
    }

    void close_socket() {
        if (!response_done_) {
            // The request ends here without a complete response. on_close fires first: it is skipped once the
            // handler completed, and a request cut off by the server (shutdown timeout) must be cancelled too.
            peer_closed_ = true;
            closed.store(true);
            fire_on_close();
            response_done_ = true;
            completed_ = true;
            log_access(false);
            uncount();
        }
        closed.store(true);
        error_code ignored;
        socket_().close(ignored);
    }

    // After a complete answer: TCP's FIN, preceded over TLS by a close_notify (a body that ends with the connection
    // is then known to be whole).
    void close_gracefully() {
        if (!stream_.is_tls() || closed.load()) {
            error_code ignored;
            socket_().shutdown(tcp::socket::shutdown_send, ignored);
            return close_socket();
        }
        stream_.lowest().expires_after(std::chrono::seconds(2));
        stream_.async_shutdown([self = shared_from_this()](error_code) { self->close_socket(); });
    }

    tcp::socket& socket_() { return stream_.lowest().socket(); }

    // The status and X-Request-Id of the answer, for the access log.
    void note_answer(int status, const Headers& headers) {
        status_ = status;
        if (server_.options.on_status) server_.options.on_status(status);
        if (const std::string* id = find_header(headers, "x-request-id")) response_id_ = *id;
    }

    // A new request's notes: the line they write when released carries what this connection filled into `record`.
    void start_access_record() {
        if (!server_.options.access_log) return;
        auto record = std::make_shared<AccessRecord>();
        record->time_unix = unix_now();
        record->client = client_;
        notes_ = std::make_shared<RequestNotes>();
        notes_->on_release = [record, log = server_.options.access_log](const RequestNotes& n) {
            record->tenant = n.tenant;
            record->model = n.model;
            record->prompt_tokens = n.prompt_tokens;
            record->completion_tokens = n.completion_tokens;
            record->ttft_s = n.ttft_s;
            log->write(*record);
        };
        record_ = std::move(record);
    }

    // The answer ended (written out, or the connection is gone): the connection's part of the line.
    void log_access(bool complete) {
        if (!record_) return;
        record_->request_id = response_id_;
        record_->method = method_;
        record_->path = path_;
        record_->status = status_ == 0 ? 499 : status_;
        record_->duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
        record_->streamed = streaming_;
        record_->complete = complete;
        record_.reset();
        notes_.reset();  // the line is written now, or when the handler's work lets go of the notes
    }

    // Requests that arrive during a shutdown are answered (503) but not waited for.
    void count() {
        counted_ = !server_.draining.load();
        if (counted_) server_.in_flight.fetch_add(1);
    }
    void uncount() {
        if (counted_) server_.in_flight.fetch_sub(1);
        counted_ = false;
    }

    friend class Exchange;
    Server::Impl& server_;
    std::shared_ptr<asio::io_context> ioc_;
    ConnectionStream stream_;
    asio::steady_timer watch_timer_;  // TLS: polls for a peer that went away (watch_tls_peer)
    beast::flat_buffer buffer_;
    std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
    std::string client_, remote_, target_;  // client_: the peer's address without the port
    // For the access log: the current request and its answer.
    std::string method_, path_, response_id_;
    std::shared_ptr<RequestNotes> notes_;
    std::shared_ptr<AccessRecord> record_;
    std::chrono::steady_clock::time_point started_;
    int status_ = 0;
    bool refused_ = false;  // not in --allowed-ips: every request gets 403
    std::deque<std::string> queue_;
    std::string out_;
    std::function<void()> on_close_;
    uint64_t exchange_id_ = 0;
    bool first_request_ = true;
    bool keep_alive_ = true;
    bool http10_ = false;  // the request is HTTP/1.0
    bool head_ = false;
    bool writing_ = false;
    bool streaming_ = false;
    bool completed_ = false;     // the handler finished its response (bytes may still be queued)
    bool response_done_ = true;  // ... and it was written out or the connection died (true: no request pending)
    bool close_after_write_ = false;
    bool peer_closed_ = false;
    bool counted_ = false;  // this exchange is in Server::Impl::in_flight
};

// The Responder a handler holds: a handle on one request of a session.
class Exchange final : public Responder {
  public:
    Exchange(std::shared_ptr<Session> session, uint64_t id) : session_(std::move(session)), id_(id) {}
    ~Exchange() override {
        if (!done_.load()) session_->run_on_strand([s = session_, id = id_] { s->abandon(id); });
    }

    void send(Response response) override {
        if (done_.exchange(true)) return;
        session_->run_on_strand(
            [s = session_, id = id_, r = std::move(response)]() mutable { s->send(id, std::move(r)); });
    }
    void start_stream(int status, std::string content_type, Headers headers) override {
        session_->run_on_strand([s = session_, id = id_, status, ct = std::move(content_type), h = std::move(headers)] {
            s->start_stream(id, status, ct, h);
        });
    }
    bool write(std::string data) override {
        if (session_->closed.load() || done_.load()) return false;
        session_->run_on_strand(
            [s = session_, id = id_, d = std::move(data)]() mutable { s->write_chunk(id, std::move(d)); });
        return true;
    }
    void finish() override {
        if (done_.exchange(true)) return;
        session_->run_on_strand([s = session_, id = id_] { s->finish(id); });
    }
    size_t pending_bytes() const override { return session_->pending_bytes.load(); }
    bool closed() const override { return session_->closed.load(); }
    void on_close(std::function<void()> callback) override {
        session_->run_on_strand(
            [s = session_, id = id_, cb = std::move(callback)]() mutable { s->set_on_close(id, std::move(cb)); });
    }
    void post(std::function<void()> fn) override { session_->run_on_strand(std::move(fn)); }

  private:
    std::shared_ptr<Session> session_;
    const uint64_t id_;
    std::atomic<bool> done_{false};
};

void Session::on_body(error_code ec) {
    if (ec) return on_read_error(ec);
    stream_.lowest().expires_never();
    started_ = std::chrono::steady_clock::now();
    status_ = 0;
    response_id_.clear();
    start_access_record();
    auto msg = parser_->release();
    Request req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    const size_t q = req.target.find('?');
    req.path = q == std::string::npos ? req.target : req.target.substr(0, q);
    for (const auto& field : msg)
        req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    req.body = std::move(msg.body());
    req.remote = remote_;
    req.notes = notes_;
    method_ = req.method;
    path_ = req.path;
    target_ = req.target;
    keep_alive_ = msg.keep_alive();
    http10_ = msg.version() == 10;
    head_ = msg.method() == bhttp::verb::head;
    streaming_ = false;
    completed_ = false;
    response_done_ = false;
    ++exchange_id_;
    count();
    auto responder = std::make_shared<Exchange>(shared_from_this(), exchange_id_);
    watch_for_disconnect();
    try {
        server_.handler(std::move(req), std::move(responder));
    } catch (const std::exception& e) {
        // Handlers report errors as responses; an exception here is a bug, answered by the Exchange's 500.
        PAGODA_LOG_ERROR(std::string("http: handler threw: ") + e.what());
    }
}

void Server::Impl::do_accept() {
    acceptor.async_accept(asio::make_strand(*ioc), [this](error_code ec, tcp::socket socket) {
        if (ec) {
            if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
            // Out of file descriptors and the like: keep accepting after a pause instead of spinning.
            PAGODA_LOG_WARNING("http: accept failed: " + ec.message());
            auto timer = std::make_shared<asio::steady_timer>(control, std::chrono::milliseconds(50));
            timer->async_wait([this, timer](error_code) { do_accept(); });
            return;
        }
        // While draining, new connections are still accepted so that /health can answer 503 (load balancers then
        // stop routing here) and late requests get a 503 instead of a refused connection.
        auto session = std::make_shared<Session>(*this, ioc, std::move(socket));
        {
            std::lock_guard<std::mutex> lock(mu);
            // Forget sessions that ended, so the list stays the size of the open connections.
            for (auto it = sessions.begin(); it != sessions.end();)
                it = it->expired() ? sessions.erase(it) : ++it;
            sessions.push_back(session);
        }
        session->start();
        do_accept();
    });
}

void Server::Impl::wait_for_signal() {
    signals.async_wait([this](error_code ec, int signal) {
        if (ec) return;
        if (signal == SIGHUP) {
            std::function<void()> cb;
            {
                std::lock_guard<std::mutex> lock(mu);
                cb = reload_callback;
            }
            if (cb) cb();
        } else if (draining.load()) {
            // A second signal: stop waiting for requests in flight.
            PAGODA_LOG_WARNING("http: second signal; closing the remaining connections now");
            stop_waiting.store(true);
        } else {
            begin_shutdown();
        }
        wait_for_signal();
    });
}

void Server::Impl::begin_shutdown() {
    if (draining.exchange(true)) return;
    PAGODA_LOG_INFO("http: shutting down; waiting for " + std::to_string(in_flight.load()) + " request(s) (up to " +
                    std::to_string(options.shutdown_timeout_s) + " s)");
    std::function<void()> cb;
    {
        std::lock_guard<std::mutex> lock(mu);
        cb = shutdown_callback;
    }
    if (cb) cb();
    shutdown_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.shutdown_timeout_s);
    poll_shutdown();
}

void Server::Impl::poll_shutdown() {
    if (in_flight.load() > 0 && !stop_waiting.load() && std::chrono::steady_clock::now() < shutdown_deadline) {
        shutdown_timer.expires_after(std::chrono::milliseconds(20));
        shutdown_timer.async_wait([this](error_code) { poll_shutdown(); });
        return;
    }
    error_code ignored;
    acceptor.close(ignored);
    signals.cancel(ignored);
    close_all_sessions();
    stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    wait_for_sessions_then_stop();
}

void Server::Impl::wait_for_sessions_then_stop() {
    // The closed sessions finish their last handlers; once none is left (or a handler elsewhere still holds one past
    // the deadline) the I/O threads stop.
    bool alive = false;
    {
        std::lock_guard<std::mutex> lock(mu);
        for (auto& weak : closing)
            alive = alive || !weak.expired();
    }
    if (!alive || std::chrono::steady_clock::now() >= stop_deadline) {
        ioc->stop();
        return;
    }
    shutdown_timer.expires_after(std::chrono::milliseconds(10));
    shutdown_timer.async_wait([this](error_code) { wait_for_sessions_then_stop(); });
}

void Server::Impl::close_all_sessions() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& weak : sessions)
        if (auto s = weak.lock()) s->close_now();
    closing = std::move(sessions);
    sessions.clear();
}

namespace {

// The TLS context of --ssl-*: TLS 1.2 and 1.3 only; a file that cannot be read is named in the error.
Result<asio::ssl::context> make_tls_context(const TlsOptions& o) {
    asio::ssl::context ctx(asio::ssl::context::tls_server);
    error_code ec;
    ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                        asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                        asio::ssl::context::single_dh_use,
                    ec);
    auto failed = [&](const std::string& what) {
        return Status::error(what + ": " + ec.message() + " (PEM expected)");
    };
    if (ctx.use_certificate_chain_file(o.certfile, ec); ec) return failed("--ssl-certfile " + o.certfile);
    if (o.keyfile.empty()) return Status::error("--ssl-certfile needs --ssl-keyfile (the certificate's private key)");
    if (ctx.use_private_key_file(o.keyfile, asio::ssl::context::pem, ec); ec)
        return failed("--ssl-keyfile " + o.keyfile);
    if (!o.ca_certs.empty()) {
        if (ctx.load_verify_file(o.ca_certs, ec); ec) return failed("--ssl-ca-certs " + o.ca_certs);
    } else if (o.cert_reqs != 0) {
        return Status::error("--ssl-cert-reqs " + std::to_string(o.cert_reqs) +
                             " needs --ssl-ca-certs (the CAs client certificates are checked against)");
    }
    asio::ssl::verify_mode mode = asio::ssl::verify_none;
    if (o.cert_reqs == 1) mode = asio::ssl::verify_peer;
    if (o.cert_reqs == 2) mode = asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert;
    if (ctx.set_verify_mode(mode, ec); ec) return failed("--ssl-cert-reqs");
    return ctx;
}

}  // namespace

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
    if (!impl_) return;
    impl_->ioc->stop();
    if (impl_->options.handle_signals) {
        // The drain is over and the process is on its way out (stopping its engine, freeing the model). A supervisor
        // that repeats its stop now (`docker stop` twice, a second Ctrl-C) must not turn that clean exit into 143.
        // Clearing the signal_set hands the signals back to their default action (ending the process), so they are
        // ignored right after, before the rest of the server is torn down; only SIGKILL ends the process from here.
        error_code ignored;
        impl_->signals.clear(ignored);
        std::signal(SIGINT, SIG_IGN);
        std::signal(SIGTERM, SIG_IGN);
        std::signal(SIGHUP, SIG_IGN);
    }
}

Result<std::unique_ptr<Server>> Server::create(const ServerOptions& options, Handler handler) {
    auto ioc = std::make_shared<asio::io_context>(std::max(1, options.num_threads));
    auto impl = std::make_unique<Impl>(options, std::move(handler), ioc);
    if (options.tls.enabled()) {
        auto tls = make_tls_context(options.tls);
        if (!tls.ok()) return tls.status();
        impl->tls.emplace(std::move(tls).value());
    }
    error_code ec;
    auto address = asio::ip::make_address(options.host, ec);
    if (ec) return Status::error("--host: '" + options.host + "' is not an IP address");
    tcp::endpoint endpoint(address, options.port);
    impl->acceptor.open(endpoint.protocol(), ec);
    if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) impl->acceptor.bind(endpoint, ec);
    if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
        return Status::error("cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " +
                             ec.message());
    }
    if (options.handle_signals) {
        impl->signals.add(SIGINT);
        impl->signals.add(SIGTERM);
        impl->signals.add(SIGHUP);
    }
    return std::unique_ptr<Server>(new Server(std::move(impl)));
}

uint16_t Server::port() const {
    error_code ec;
    auto ep = impl_->acceptor.local_endpoint(ec);
    return ec ? 0 : ep.port();
}

void Server::run() {
    Impl* impl = impl_.get();
    impl->do_accept();
    if (impl->options.handle_signals) impl->wait_for_signal();
    std::vector<std::thread> threads;
    for (int i = 1; i < impl->options.num_threads; ++i)
        threads.emplace_back([impl] { impl->ioc->run(); });
    impl->ioc->run();
    for (auto& t : threads)
        t.join();
}

void Server::shutdown() {
    Impl* impl = impl_.get();
    asio::post(impl->control, [impl] { impl->begin_shutdown(); });
}

void Server::on_reload(std::function<void()> callback) {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->reload_callback = std::move(callback);
}

void Server::on_shutdown(std::function<void()> callback) {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->shutdown_callback = std::move(callback);
}

int64_t Server::in_flight() const {
    return impl_->in_flight.load();
}

}  // namespace pagoda::server::http
