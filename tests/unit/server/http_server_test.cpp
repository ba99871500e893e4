// HTTP layer over real loopback sockets: keep-alive, limits, malformed input, streaming, disconnect, shutdown.
#include "server/http/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <thread>

#include "raw_client.h"

namespace pagoda::server::http {
namespace {

using testing::RawClient;

class HttpServerTest : public ::testing::Test {
  protected:
    void start(Handler handler, ServerOptions options = {}) {
        options.port = 0;
        options.handle_signals = false;
        auto server = Server::create(options, std::move(handler));
        ASSERT_TRUE(server.ok()) << server.message();
        server_ = std::move(server).value();
        thread_ = std::thread([this] { server_->run(); });
    }
    void TearDown() override {
        if (server_) server_->shutdown();
        if (thread_.joinable()) thread_.join();
    }
    uint16_t port() const { return server_->port(); }

    std::unique_ptr<Server> server_;
    std::thread thread_;
};

Handler echo_handler() {
    return [](Request req, std::shared_ptr<Responder> r) {
        Response resp;
        resp.content_type = "text/plain";
        resp.body = req.method + " " + req.path + " " + req.body;
        if (const auto* h = find_header(req.headers, "x-test")) resp.headers.emplace_back("X-Echo", *h);
        r->send(std::move(resp));
    };
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
    start(echo_handler());
    RawClient c(port());
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.send("GET /a?x=1 HTTP/1.1\r\nHost: x\r\nX-Test: hi\r\n\r\n"));
    std::string r1 = c.read_response();
    EXPECT_NE(r1.find("HTTP/1.1 200 OK"), std::string::npos) << r1;
    EXPECT_NE(r1.find("X-Echo: hi"), std::string::npos) << r1;
    EXPECT_NE(r1.find("Connection: keep-alive"), std::string::npos) << r1;
    EXPECT_NE(r1.find("GET /a "), std::string::npos) << r1;
    ASSERT_TRUE(c.send("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"));
    std::string r2 = c.read_response();
    EXPECT_NE(r2.find("POST /b hello"), std::string::npos) << r2;
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
    start(echo_handler());
    RawClient c(port());
    ASSERT_TRUE(c.send("GET /one HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string r1 = c.read_response();
    std::string r2 = c.read_response();
    EXPECT_NE(r1.find("GET /one"), std::string::npos) << r1;
    EXPECT_NE(r2.find("GET /two"), std::string::npos) << r2;
}

TEST_F(HttpServerTest, MalformedRequestGets400AndClose) {
    start(echo_handler());
    RawClient c(port());
    ASSERT_TRUE(c.send("THIS IS NOT HTTP\r\n\r\n"));
    std::string r = c.read_response();
    EXPECT_NE(r.find("HTTP/1.1 400"), std::string::npos) << r;
    EXPECT_NE(r.find("\"error\""), std::string::npos) << r;
    EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(HttpServerTest, OversizedBodyGets413) {
    ServerOptions options;
    options.max_body_bytes = 1000;
    start(echo_handler(), options);
    RawClient c(port());
    ASSERT_TRUE(c.send("POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n"));
    std::string r = c.read_response();
    EXPECT_NE(r.find("HTTP/1.1 413"), std::string::npos) << r;
    EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(HttpServerTest, OversizedHeadersGet431) {
    ServerOptions options;
    options.max_header_bytes = 1024;
    start(echo_handler(), options);
    RawClient c(port());
    ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4000, 'a') + "\r\n\r\n"));
    std::string r = c.read_response();
    EXPECT_NE(r.find("HTTP/1.1 431"), std::string::npos) << r;
}

TEST_F(HttpServerTest, ExpectContinueGets100BeforeTheBody) {
    start(echo_handler());
    RawClient c(port());
    ASSERT_TRUE(c.send("POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"));
    std::string cont = c.read_until("\r\n\r\n");
    EXPECT_NE(cont.find("100 Continue"), std::string::npos) << cont;
    ASSERT_TRUE(c.send("abc"));
    std::string r = c.read_response();
    EXPECT_NE(r.find("POST /e abc"), std::string::npos) << r;
}

TEST_F(HttpServerTest, StreamedResponseIsChunkedAndConnectionStaysUsable) {
    start([](Request req, std::shared_ptr<Responder> r) {
        if (req.path != "/stream") {
            r->send(Response{200, {}, "after", "text/plain"});
            return;
        }
        r->start_stream(200, "text/event-stream");
        // From another thread, as engine events arrive.
        std::thread([r] {
            for (int i = 0; i < 3; ++i)
                EXPECT_TRUE(r->write("data: " + std::to_string(i) + "\n\n"));
            r->finish();
        }).detach();
    });
    RawClient c(port());
    ASSERT_TRUE(c.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string r = c.read_until("0\r\n\r\n");
    EXPECT_NE(r.find("Transfer-Encoding: chunked"), std::string::npos) << r;
    EXPECT_NE(r.find("Content-Type: text/event-stream"), std::string::npos) << r;
    EXPECT_NE(r.find("9\r\ndata: 0\n\n\r\n"), std::string::npos) << r;
    EXPECT_NE(r.find("9\r\ndata: 2\n\n\r\n"), std::string::npos) << r;
    ASSERT_TRUE(c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_NE(c.read_response().find("after"), std::string::npos);
}

TEST_F(HttpServerTest, StreamToAnHttp10ClientIsRawAndEndsWithTheConnection) {
    start([](Request, std::shared_ptr<Responder> r) {
        r->start_stream(200, "text/event-stream");
        std::thread([r] {
            for (int i = 0; i < 3; ++i)
                EXPECT_TRUE(r->write("data: " + std::to_string(i) + "\n\n"));
            r->finish();
        }).detach();
    });
    RawClient c(port());
    ASSERT_TRUE(c.send("GET /stream HTTP/1.0\r\n\r\n"));
    std::string r = c.read_until("data: 2\n\n");
    EXPECT_EQ(r.find("Transfer-Encoding"), std::string::npos) << r;  // HTTP/1.0 has no chunked encoding
    EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
    EXPECT_NE(r.find("\r\n\r\ndata: 0\n\ndata: 1\n\ndata: 2\n\n"), std::string::npos) << r;
    EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(HttpServerTest, ClientDisconnectFiresOnClose) {
    std::mutex mu;
    std::condition_variable cv;
    bool closed = false;
    std::shared_ptr<Responder> held;
    start([&](Request, std::shared_ptr<Responder> r) {
        r->on_close([&] {
            std::lock_guard<std::mutex> lock(mu);
            closed = true;
            cv.notify_all();
        });
        std::lock_guard<std::mutex> lock(mu);
        held = r;  // never answers: like a long generation
    });
    {
        RawClient c(port());
        ASSERT_TRUE(c.send("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
        // Wait until the handler has the request before hanging up.
        for (int i = 0; i < 1000; ++i) {
            std::lock_guard<std::mutex> lock(mu);
            if (held) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return closed; }));
    EXPECT_TRUE(held->closed());
    EXPECT_FALSE(held->write("late"));
    held.reset();
}

// When the shutdown timeout runs out, the server closes connections whose requests are still running; their
// on_close must fire so that the work behind them (an engine request) is cancelled, as for a client hang-up.
TEST_F(HttpServerTest, ShutdownTimeoutFiresOnCloseOfRequestsInFlight) {
    std::mutex mu;
    std::condition_variable cv;
    bool closed = false;
    std::shared_ptr<Responder> held;
    ServerOptions options;
    options.shutdown_timeout_s = 0;
    start(
        [&](Request, std::shared_ptr<Responder> r) {
            r->on_close([&] {
                std::lock_guard<std::mutex> lock(mu);
                closed = true;
                cv.notify_all();
            });
            std::lock_guard<std::mutex> lock(mu);
            held = r;  // never answers: like a long generation
        },
        options);
    RawClient c(port());
    ASSERT_TRUE(c.send("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
    for (int i = 0; i < 1000; ++i) {
        std::lock_guard<std::mutex> lock(mu);
        if (held) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    server_->shutdown();
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return closed; }));
    ASSERT_TRUE(held);
    EXPECT_TRUE(held->closed());
    held.reset();
}

TEST_F(HttpServerTest, DroppedResponderAnswers500) {
    start([](Request, std::shared_ptr<Responder>) {});
    RawClient c(port());
    ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_NE(c.read_response().find("HTTP/1.1 500"), std::string::npos);
}

TEST_F(HttpServerTest, ShutdownWaitsForInFlightThenStops) {
    std::shared_ptr<Responder> pending;
    std::mutex mu;
    start([&](Request, std::shared_ptr<Responder> r) {
        std::lock_guard<std::mutex> lock(mu);
        pending = std::move(r);
    });
    std::atomic<bool> shutdown_seen{false};
    server_->on_shutdown([&] { shutdown_seen = true; });
    RawClient c(port());
    ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    for (int i = 0; i < 1000 && server_->in_flight() == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(server_->in_flight(), 1);
    server_->shutdown();
    for (int i = 0; i < 1000 && !shutdown_seen; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(shutdown_seen);
    // New connections are refused once draining, the in-flight one still gets its answer.
    {
        std::lock_guard<std::mutex> lock(mu);
        ASSERT_TRUE(pending);
        pending->send(Response{200, {}, "late answer", "text/plain"});
        pending.reset();
    }
    std::string r = c.read_response();
    EXPECT_NE(r.find("late answer"), std::string::npos) << r;
    EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
    thread_.join();  // run() returns on its own
    EXPECT_EQ(server_->in_flight(), 0);
}

// A supervisor that repeats its stop after the drain (`docker stop` twice, the test harness's own SIGTERM) reaches a
// process that is stopping its engine: that signal must not turn the clean exit into 143.
TEST(HttpServerSignalsTest, SignalAfterTheServerIsGoneDoesNotEndTheProcess) {
    EXPECT_EXIT(
        {
            ServerOptions options;
            options.port = 0;
            auto server = Server::create(options, echo_handler());
            if (!server.ok()) std::_Exit(3);
            std::thread io([&server] { (*server)->run(); });
            std::raise(SIGTERM);  // queued by the server's signal_set until run() waits for it: the graceful stop
            io.join();
            server->reset();
            std::raise(SIGTERM);  // the supervisor's second stop, while the process tears down
            std::_Exit(0);
        },
        ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace pagoda::server::http
