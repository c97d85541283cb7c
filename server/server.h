#pragma once
// The listening side of larmor-server: accepts connections on a main io_context, refuses those from
// outside --allow, gives each other one its own Session on its own thread, turns away connections
// over --max-sessions, and shuts down in order on SIGINT/SIGTERM (stop accepting, let sessions
// finish for a bounded time, then end them); SIGHUP reloads the chains of the config directory.
#include <cstdint>
#include <list>
#include <memory>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "server/access_list.h"
#include "server/http_endpoint.h"
#include "server/log_throttle.h"
#include "server/server_options.h"
#include "server/session.h"

namespace larmor::server {

class Server {
public:
    // Throws std::invalid_argument naming the id and the device count when options.devices names
    // a CUDA device this machine does not have, or naming a malformed --allow network; throws
    // std::runtime_error naming a TLS file that cannot be used.
    explicit Server(ServerOptions options);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds and listens; returns the bound endpoint (the real port when options.port is 0).
    // Throws std::runtime_error naming the address and port when that fails.
    boost::asio::ip::tcp::endpoint listen();
    // The HTTP endpoint's bound address after listen() (port 0 when --http-port is off).
    boost::asio::ip::tcp::endpoint http_endpoint() const { return http_endpoint_; }

    // Serves until SIGINT/SIGTERM, then shuts down. Returns false when some session did not stop
    // within the grace period plus the abort period (its thread is then detached).
    bool run();

    const ServerOptions& options() const { return env_->options; }
    const DevicePool& devices() const { return *env_->devices; }
    const ServerMemory& memory() const { return *env_->memory; }
    const ChainCatalog& chains() const { return *env_->chains; }

private:
    struct Running {
        std::shared_ptr<Session> session;
        std::thread thread;
    };
    // A connection that has sent nothing yet: held here, without a thread, until its first byte (then it
    // gets its Session) or the handshake deadline (then it is told and closed).
    struct Waiting {
        Waiting(boost::asio::ip::tcp::socket s, boost::asio::io_context& ioc, std::string a)
            : socket(std::move(s)), deadline(ioc), address(std::move(a)) {}
        boost::asio::ip::tcp::socket socket;
        boost::asio::steady_timer deadline;
        std::string address;
        std::chrono::steady_clock::time_point connected = std::chrono::steady_clock::now();
        bool over = false;  // the first of readable / deadline / shutdown has handled it
    };

    void accept_next();
    void on_accept(const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket);
    // Keeps a new connection pending (connection_slots.h) until it sends, or turns it away when the
    // pending limits are reached.
    void hold(boost::asio::ip::tcp::socket socket, std::string address);
    void on_first_bytes(const std::shared_ptr<Waiting>& w);
    void on_silent_deadline(const std::shared_ptr<Waiting>& w);
    // Closes a connection that has sent nothing, telling it `why` (plain TCP) and logging it (throttled).
    void close_silent(std::shared_ptr<Waiting> w, const std::string& why);  // by value: it leaves waiting_
    // The connection's Session, on its own thread and io_context; it is pending until its chain config.
    void start_session(boost::asio::ip::tcp::socket socket, std::string address,
                       std::chrono::steady_clock::time_point connected);
    // Refuses a client from outside --allow; true when it did (the socket is then gone).
    bool refuse_if_not_allowed(boost::asio::ip::tcp::socket& socket);
    // TEXT + CLOSE to a turned-away client, asynchronously on ioc_ (rejection.h); a flood is just closed.
    void send_refusal(boost::asio::ip::tcp::socket socket, const std::string& text);
    void reap();  // joins the threads of finished sessions
    void wait_for_signal();
    void wait_for_reload();  // SIGHUP: the config directory is read again (chain_catalog.h)
    void begin_shutdown(int signal_number);
    void shutdown_tick();

    std::shared_ptr<SessionEnvironment> env_;
    AccessList access_;
    LogThrottle refusal_log_{20, std::chrono::seconds(10)};  // refused-by---allow lines
    LogThrottle pending_log_{20, std::chrono::seconds(10)};  // over the pending limits, silent connections
    // Before ioc_: handlers destroyed with ioc_ (a pending rejection) may still decrement it.
    size_t rejections_in_flight_ = 0;
    boost::asio::io_context ioc_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::signal_set signals_;
    boost::asio::signal_set reload_signal_;
    boost::asio::steady_timer shutdown_timer_;
    boost::asio::steady_timer accept_retry_timer_;  // pause after a failed accept (EMFILE)
    // After ioc_ and access_: its connections live on ioc_ and read the access list.
    std::unique_ptr<HttpEndpoint> http_;
    boost::asio::ip::tcp::endpoint http_endpoint_;

    std::list<Running> sessions_;
    std::list<std::shared_ptr<Waiting>> waiting_;  // on ioc_'s thread only
    uint64_t next_session_number_ = 1;

    bool shutting_down_ = false;
    bool sessions_told_to_stop_ = false;
    bool stuck_ = false;
    std::chrono::steady_clock::time_point grace_deadline_, abort_deadline_;
};

}  // namespace larmor::server
