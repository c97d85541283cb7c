#include "server/server.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "core/backend.h"
#include "core/cpu/fftw_plans.h"
#include "server/http_status.h"
#include "server/rejection.h"
#include "server/tls_context.h"

namespace larmor::server {
namespace {

constexpr auto kShutdownPoll = std::chrono::milliseconds(100);
// After the grace period sessions are told to stop; this is how long they get to do so.
constexpr auto kAbortTime = std::chrono::seconds(10);
constexpr auto kRejectionLinger = std::chrono::seconds(5);
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);
constexpr size_t kRejectionsLingering = 4096;

}  // namespace

Server::Server(ServerOptions options)
    : env_(std::make_shared<SessionEnvironment>()),
      ioc_(1),
      acceptor_(ioc_),
      signals_(ioc_, SIGINT, SIGTERM),
      reload_signal_(ioc_, SIGHUP),
      shutdown_timer_(ioc_),
      accept_retry_timer_(ioc_) {
    env_->options = std::move(options);
    // Here rather than at the first CUDA session, so a wrong --devices stops the server at startup.
    const int device_count = static_cast<int>(cuda_devices().size());
    const std::vector<int> device_ids = parse_device_list(env_->options.devices, device_count);
    env_->devices = std::make_unique<DevicePool>(device_ids);
    env_->memory = std::make_unique<ServerMemory>(env_->options.memory, machine_memory(), device_ids,
                                                  &cuda_device_memory);
    env_->max_header_bytes = parse_memory_size(env_->options.max_header_bytes, 0, "--max-header-bytes");
    env_->max_config_bytes = parse_memory_size(env_->options.max_config_bytes, 0, "--max-config-bytes");
    // The codec's own bound on any text must not cut below what the flags allow.
    wire::Limits& limits = env_->options.limits;
    limits.max_text_bytes = std::max({limits.max_text_bytes, env_->max_header_bytes, env_->max_config_bytes});
    env_->chains = std::make_unique<ChainCatalog>(env_->options.config_dir);
    SlotLimits slots;
    slots.sessions = env_->options.max_sessions;
    slots.sessions_per_address = env_->options.max_sessions_per_address;
    slots.pending = env_->options.max_pending;
    slots.pending_per_address = env_->options.max_pending_per_address;
    env_->slots = std::make_unique<ConnectionSlots>(slots, env_->stats);
    for (const auto& p : env_->chains->last_report().problems) spdlog::error("chain {}", p);
    if (!env_->options.dependency_dir.empty()) {
        NoiseStoreLimits limits;
        limits.max_bytes = parse_memory_size(env_->options.dependency_limit, 0, "--dependency-store-limit");
        limits.max_entries = env_->options.dependency_entries;
        limits.max_channels = env_->options.dependency_max_channels;
        limits.allow_overwrite = env_->options.dependency_overwrite;
        env_->dependencies = std::make_shared<NoiseDependencyStore>(env_->options.dependency_dir, limits);
    }
    PrecomputeCache::Options pc;
    const std::shared_ptr<MemoryBudget>& host = env_->memory->host();
    pc.memory_limit = parse_memory_size(env_->options.precompute_memory, host->limit(), "--precompute-cache-memory");
    pc.directory = env_->options.precompute_dir;
    pc.disk_limit = parse_memory_size(env_->options.precompute_disk, 0, "--precompute-cache-disk");
    std::map<int, std::shared_ptr<MemoryBudget>> device_budgets;
    for (const int d : device_ids) device_budgets[d] = env_->memory->device_budget(d);
    env_->precompute = std::make_shared<PrecomputeCache>(pc, host, std::move(device_budgets));
    if (!pc.directory.empty()) {
        // FFTW's wisdom beside the kernels: a restarted server plans a known shape without measuring
        // and picks the algorithm it picked before (core/cpu/fftw_plans.h).
        const std::string problem = fftw_wisdom_file((std::filesystem::path(pc.directory) / "fftw_wisdom").string());
        if (!problem.empty()) spdlog::warn("{}", problem);
    }
    // Page-locked blocks the CUDA backend keeps between sessions count as the server's host memory,
    // and give way before a session is refused.
    set_cuda_host_cache_budget(host);
    // So are the FFTW plans kept for later sessions (core/cpu/fftw_plans.h), which give way too.
    set_fftw_plan_budget(host);
    env_->memory->set_reclaimer([cache = std::weak_ptr<PrecomputeCache>(env_->precompute)](int device, uint64_t bytes) {
        const auto c = cache.lock();
        uint64_t freed = c ? c->shrink(bytes, device) : uint64_t(0);
        if (device < 0 && freed < bytes) freed += release_idle_cuda_host_memory(bytes - freed);
        if (device < 0 && freed < bytes) freed += fftw_drop_idle_plans();
        return freed;
    });
    // Both here, so a malformed network or an unusable certificate stops the server at startup.
    access_ = AccessList(env_->options.security.allow);
    if (!env_->options.security.tls.cert.empty())
        env_->tls = std::make_shared<TlsContext>(env_->options.security.tls);
}

Server::~Server() {
    // run() normally joined everything; this covers an exception escaping run().
    for (auto& r : sessions_) {
        r.session->request_stop();
        if (r.thread.joinable()) r.thread.join();
    }
}

boost::asio::ip::tcp::endpoint Server::listen() {
    const ServerOptions& o = env_->options;
    boost::system::error_code ec;
    const auto address = boost::asio::ip::make_address(o.address, ec);
    if (ec) throw std::runtime_error("invalid --address '" + o.address + "': " + ec.message());
    const boost::asio::ip::tcp::endpoint endpoint(address, o.port);
    const std::string where = o.address + ":" + std::to_string(o.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(boost::asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(boost::asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("cannot listen on " + where + ": " + ec.message());
    spdlog::info("{}; clients allowed from {}", env_->tls ? env_->tls->description() : std::string("plain TCP (no TLS)"),
                 access_.to_string());
    if (o.http_port >= 0) {
        http_ = std::make_unique<HttpEndpoint>(ioc_, access_, [this](const std::string& target) {
            StatusSources s{QueryContext{env_->options, env_->stats, env_->devices.get(), env_->memory.get(),
                                         env_->chains.get()},
                            env_->precompute.get(), [this] { return shutting_down_; },
                            [this] {  // on ioc_'s thread, as every change of sessions_
                                std::vector<Session::Live> live;
                                for (const Running& r : sessions_)
                                    if (!r.session->finished()) live.push_back(r.session->live());
                                return live;
                            },
                            &env_->recent_errors};
            return http_status_reply(target, s);
        });
        http_endpoint_ = http_->listen(address, static_cast<unsigned short>(o.http_port));
        spdlog::info("HTTP status on {}:{} (/healthz /readyz /metrics /status /), clients allowed from {}",
                     http_endpoint_.address().to_string(), http_endpoint_.port(), access_.to_string());
    }
    return acceptor_.local_endpoint();
}

bool Server::run() {
    wait_for_signal();
    wait_for_reload();
    accept_next();
    ioc_.run();
    reap();
    if (!sessions_.empty()) {
        spdlog::error("{} session(s) did not stop; leaving them behind", sessions_.size());
        for (auto& r : sessions_) r.thread.detach();
        sessions_.clear();
        return false;
    }
    spdlog::info("stopped: {} sessions served, {} turned away, {} refused by --allow, {} failed TLS handshakes",
                 env_->stats.sessions_total.load(), env_->stats.sessions_rejected.load(),
                 env_->stats.connections_refused.load(), env_->stats.tls_handshakes_failed.load());
    return !stuck_;
}

void Server::accept_next() {
    // Accepted onto the main io_context: a connection waits here, without a thread, until it sends.
    acceptor_.async_accept(ioc_, [this](const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket) {
        on_accept(ec, std::move(socket));
    });
}

void Server::on_accept(const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket) {
    if (shutting_down_ || ec == boost::asio::error::operation_aborted) return;
    reap();
    if (ec) {
        // EMFILE and friends: keep serving the sessions we have and try again shortly, without
        // spinning on an error that persists until some session ends.
        spdlog::warn("accept failed: {}; retrying in {} ms", ec.message(), kAcceptRetry.count());
        accept_retry_timer_.expires_after(kAcceptRetry);
        accept_retry_timer_.async_wait([this](const boost::system::error_code& wait_ec) {
            if (!wait_ec && !shutting_down_) accept_next();
        });
        return;
    }
    // Refused before anything of a session exists: no thread, no session memory.
    if (!refuse_if_not_allowed(socket)) {
        boost::system::error_code peer_ec;
        const auto peer = socket.remote_endpoint(peer_ec);
        hold(std::move(socket), peer_ec ? std::string() : peer.address().to_string());
    }
    accept_next();
}

void Server::hold(boost::asio::ip::tcp::socket socket, std::string address) {
    ConnectionSlots::Verdict v = env_->slots->add_pending(address);
    // Full of connections: the oldest one that has not sent a byte gives way (a flood of silent
    // connections must not keep a real client out, and one that is about to talk has sent by now).
    // Connections that are talking, however slowly, are left to the handshake deadline.
    if (v == ConnectionSlots::Verdict::ServerFull && !waiting_.empty()) {
        close_silent(waiting_.front(), "closed to make room for a newer connection (--max-pending-connections " +
                                           std::to_string(env_->slots->limits().pending) + ")");
        v = env_->slots->add_pending(address);
    }
    if (v != ConnectionSlots::Verdict::Ok) {
        ++env_->stats.pending_refused;
        const SlotLimits& l = env_->slots->limits();
        const std::string why =
            v == ConnectionSlots::Verdict::ServerFull
                ? std::to_string(l.pending) + " connections are waiting to start a session (--max-pending-connections " +
                      std::to_string(l.pending) + ")"
                : std::to_string(l.pending_per_address) + " connections from " + address +
                      " are waiting to start a session (--max-pending-per-address " +
                      std::to_string(l.pending_per_address) + ")";
        uint64_t left_out = 0;
        if (pending_log_.allow(left_out))
            spdlog::warn("turning away a connection from {}: {}{}", address.empty() ? "an unknown address" : address, why,
                         left_out ? "; " + std::to_string(left_out) +
                                        " events before this one were not logged (at most 20 lines per 10 s)"
                                  : std::string());
        send_refusal(std::move(socket), "[Server] ERROR: larmor-server is busy: " + why + "; try again later");
        return;
    }
    boost::system::error_code ignored;
    socket.set_option(boost::asio::ip::tcp::no_delay(true), ignored);  // whole messages, written at once
    auto w = std::make_shared<Waiting>(std::move(socket), ioc_, std::move(address));
    // A silent connection is told at the handshake deadline, as a session would be (the read timeout
    // when the handshake has none).
    const ServerOptions& o = env_->options;
    std::chrono::steady_clock::duration wait = o.handshake_timeout.count() > 0 ? o.handshake_timeout : o.read_timeout;
    if (env_->tls) wait = std::min<std::chrono::steady_clock::duration>(wait, o.security.tls_handshake_timeout);
    w->deadline.expires_at(w->connected + wait);
    w->deadline.async_wait([this, w](const boost::system::error_code& e) {
        if (!e) on_silent_deadline(w);
    });
    w->socket.async_wait(boost::asio::ip::tcp::socket::wait_read,
                         [this, w](const boost::system::error_code&) { on_first_bytes(w); });
    waiting_.push_back(std::move(w));
}

void Server::on_first_bytes(const std::shared_ptr<Waiting>& w) {
    if (w->over) return;
    w->over = true;
    w->deadline.cancel();
    waiting_.remove(w);
    if (shutting_down_) {  // shutdown closed it: it never became a session
        env_->slots->drop_pending(w->address);
        return;
    }
    // Readable also at EOF or a reset: the session reads that and ends as it would have anyway.
    start_session(std::move(w->socket), std::move(w->address), w->connected);
}

void Server::on_silent_deadline(const std::shared_ptr<Waiting>& w) {
    const ServerOptions& o = env_->options;
    if (env_->tls) {  // a TLS client says nothing until its handshake: it did not start one
        ++env_->stats.tls_handshakes_failed;
        close_silent(w, "no TLS handshake within " + duration_text(o.security.tls_handshake_timeout) +
                            " (--tls-handshake-timeout)");
        return;
    }
    close_silent(w, o.handshake_timeout.count() > 0
                        ? "no chain config and ISMRMRD header within --handshake-timeout " +
                              std::to_string(o.handshake_timeout.count()) + " s of connecting"
                        : read_timeout_text(o.read_timeout));
}

void Server::close_silent(std::shared_ptr<Waiting> w, const std::string& why) {
    if (w->over) return;
    w->over = true;
    boost::system::error_code ignored;
    w->deadline.cancel();
    w->socket.cancel(ignored);
    waiting_.remove(w);
    env_->slots->drop_pending(w->address);
    ++env_->stats.pending_timed_out;
    uint64_t left_out = 0;
    if (pending_log_.allow(left_out))
        spdlog::info("closing a connection from {} that sent nothing: {}{}",
                     w->address.empty() ? "an unknown address" : w->address, why,
                     left_out ? "; " + std::to_string(left_out) +
                                    " events before this one were not logged (at most 20 lines per 10 s)"
                              : std::string());
    // On a TLS port no TEXT: a plain one would reach a TLS client as a garbled record (send_refusal
    // just closes there).
    send_refusal(std::move(w->socket), "[Protocol] ERROR: " + why + " (nothing received)");
}

void Server::start_session(boost::asio::ip::tcp::socket socket, std::string address,
                           std::chrono::steady_clock::time_point connected) {
    const std::string id = "s" + std::to_string(next_session_number_++);
    bool running = false;  // from then on the session gives its pending place back itself
    try {
        // The session's own io_context, run only by its thread; the socket moves onto it.
        auto ioc = std::make_unique<boost::asio::io_context>(1);
        boost::system::error_code ec;
        const auto protocol = socket.local_endpoint(ec).protocol();
        if (ec) throw std::runtime_error("the connection is gone: " + ec.message());
        boost::asio::ip::tcp::socket moved(*ioc, protocol, socket.release());
        auto session = std::make_shared<Session>(id, std::move(ioc), std::move(moved), env_, address, connected);
        std::thread thread([this, session] {
            session->run();
            boost::asio::post(ioc_, [this] { reap(); });
        });
        running = true;
        sessions_.push_back(Running{std::move(session), std::move(thread)});
    } catch (const std::exception& e) {
        spdlog::error("cannot start session {}: {}", id, e.what());
        if (!running) env_->slots->drop_pending(address);
    }
}

bool Server::refuse_if_not_allowed(boost::asio::ip::tcp::socket& socket) {
    if (access_.empty()) return false;
    boost::system::error_code ec;
    const auto peer = socket.remote_endpoint(ec);
    if (!ec && access_.allows(peer.address())) return false;
    ++env_->stats.connections_refused;
    uint64_t left_out = 0;
    if (refusal_log_.allow(left_out)) {
        std::ostringstream who;
        if (!ec) who << peer;
        spdlog::warn("refused {}: not in --allow ({}){}", ec ? std::string("a client of unknown address") : who.str(),
                     access_.to_string(),
                     left_out ? "; " + std::to_string(left_out) + " refusals before this one were not logged (at most 20 "
                                                                  "lines per 10 s)"
                              : std::string());
    }
    // The client learns its own address and that it is not allowed; the list itself is not revealed.
    send_refusal(std::move(socket), "[Server] ERROR: connections from " +
                                        (ec ? std::string("this address") : peer.address().to_string()) +
                                        " are not allowed by this larmor-server (--allow)");
    return true;
}

void Server::send_refusal(boost::asio::ip::tcp::socket socket, const std::string& text) {
    // Each lingering refusal holds a descriptor for up to kRejectionLinger; past this many at once (a
    // flood beyond the pending limit) the socket is just closed.
    if (rejections_in_flight_ >= kRejectionsLingering) return;
    // A TLS client expects a handshake, and a plain TEXT would reach it as a garbled record: on a TLS
    // port the connection is just closed (no handshake is spent on a client that is turned away).
    if (env_->tls) return;
    // Move the socket onto the main io_context, where the rejection runs without a thread.
    boost::system::error_code ec;
    const auto protocol = socket.local_endpoint(ec).protocol();
    if (ec) return;
    boost::asio::ip::tcp::socket moved(ioc_, protocol, socket.release());
    ++rejections_in_flight_;
    reject_connection(ioc_, std::move(moved), text, kRejectionLinger, [this] { --rejections_in_flight_; });
}

void Server::reap() {
    for (auto it = sessions_.begin(); it != sessions_.end();) {
        if (it->session->finished()) {
            it->thread.join();
            it = sessions_.erase(it);
        } else {
            ++it;
        }
    }
}

void Server::wait_for_signal() {
    signals_.async_wait([this](const boost::system::error_code& ec, int signal_number) {
        if (ec) return;
        wait_for_signal();  // first: begin_shutdown may cancel it when nothing is left to wait for
        begin_shutdown(signal_number);
    });
}

void Server::wait_for_reload() {
    reload_signal_.async_wait([this](const boost::system::error_code& ec, int) {
        if (ec) return;
        const ChainCatalog::Report r = env_->chains->reload();
        std::string loaded;
        for (const auto& n : r.loaded) loaded += (loaded.empty() ? "" : ", ") + n;
        spdlog::info("SIGHUP: config directory '{}' reloaded: {} chain(s) ({}){}", env_->chains->dir(), r.loaded.size(),
                     loaded.empty() ? "none" : loaded,
                     r.removed.empty() ? std::string() : "; removed: " + std::to_string(r.removed.size()));
        for (const auto& p : r.problems) spdlog::error("SIGHUP: chain {}", p);
        if (!shutting_down_) wait_for_reload();
    });
}

void Server::begin_shutdown(int signal_number) {
    if (shutting_down_) {
        // A second signal: do not wait out the grace period.
        spdlog::warn("signal {} again: ending {} session(s) now", signal_number, sessions_.size());
        grace_deadline_ = std::chrono::steady_clock::now();
        return;
    }
    shutting_down_ = true;
    reap();
    spdlog::info("signal {}: no new connections; waiting up to {} s for {} session(s)", signal_number,
                 env_->options.shutdown_grace.count(), sessions_.size());
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    // Connections that have sent nothing are closed at once (their handlers give their places back).
    size_t silent = waiting_.size();
    for (const auto& w : std::list<std::shared_ptr<Waiting>>(waiting_)) {
        w->deadline.cancel();
        w->socket.close(ignored);
    }
    // A connection that has not sent a whole message has nothing to finish: it must not hold the grace.
    for (auto& r : sessions_)
        if (!r.session->heard_from() && !r.session->finished()) {
            r.session->request_stop();
            ++silent;
        }
    if (silent) spdlog::info("ended {} connection(s) that had sent nothing", silent);
    grace_deadline_ = std::chrono::steady_clock::now() + env_->options.shutdown_grace;
    shutdown_tick();
}

void Server::shutdown_tick() {
    reap();
    const auto now = std::chrono::steady_clock::now();
    if (sessions_.empty()) {
        signals_.cancel();  // nothing left to wait for: ioc_.run() returns once rejections end
        reload_signal_.cancel();
        if (http_) http_->stop();  // /readyz said "shutting down" through the grace period
        return;
    }
    if (!sessions_told_to_stop_ && now >= grace_deadline_) {
        spdlog::warn("grace period over: ending {} session(s)", sessions_.size());
        for (auto& r : sessions_) r.session->request_stop();
        sessions_told_to_stop_ = true;
        abort_deadline_ = now + kAbortTime;
    } else if (sessions_told_to_stop_ && now >= abort_deadline_) {
        if (http_) http_->stop();
        stuck_ = true;
        ioc_.stop();
        return;
    }
    shutdown_timer_.expires_after(kShutdownPoll);
    shutdown_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) shutdown_tick();
    });
}

}  // namespace larmor::server
