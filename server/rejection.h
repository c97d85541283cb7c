#pragma once
// Turning a connection away (session limit reached) without a thread and without a broken pipe:
// send TEXT + CLOSE, half-close, then read and drop whatever the client still sends until it
// closes or a short deadline passes, all asynchronously on the server's main io_context.
#include <chrono>
#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace larmor::server {

// `socket` must belong to `ioc`. `done` runs on `ioc` once the connection is closed.
void reject_connection(boost::asio::io_context& ioc, boost::asio::ip::tcp::socket socket, const std::string& text,
                       std::chrono::steady_clock::duration linger, std::function<void()> done);

}  // namespace larmor::server
