#pragma once
// A small HTTP/1.1 listener for operations (Boost.Beast): health and readiness probes, Prometheus
// metrics, the status JSON and a status page (server/http_status.h makes the replies). It runs on the
// server's main io_context beside the protocol acceptor, answers GET and HEAD only, one request per
// connection, and is bound to the same --address and --allow list as the protocol port. A request
// must arrive whole within a few seconds and fit in a few KiB; at most kMaxConnections are served at
// once (more are closed at accept), so a flood of probes cannot grow the server.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "server/access_list.h"

namespace larmor::server {

struct HttpReply {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
};

// The reply to a GET of `target` (path and query as sent). Called on the io_context's thread.
using HttpHandler = std::function<HttpReply(const std::string& target)>;

class HttpEndpoint {
public:
    static constexpr size_t kMaxConnections = 32;

    HttpEndpoint(boost::asio::io_context& ioc, const AccessList& access, HttpHandler handler);
    ~HttpEndpoint();
    HttpEndpoint(const HttpEndpoint&) = delete;
    HttpEndpoint& operator=(const HttpEndpoint&) = delete;

    // Binds, listens and starts accepting; returns the bound endpoint (the real port for port 0).
    // Throws std::runtime_error naming the address and port when that fails.
    boost::asio::ip::tcp::endpoint listen(const boost::asio::ip::address& address, unsigned short port);
    // Stops accepting; connections in flight finish on their own deadlines.
    void stop();

    struct State;  // the acceptor and its connections' shared part (http_endpoint.cpp)

private:
    std::shared_ptr<State> state_;
};

}  // namespace larmor::server
