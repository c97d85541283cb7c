#pragma once
// One client connection, from accept to close, on its own thread: reads messages, runs the state
// machine of protocol.md (config -> header -> data -> CLOSE, queries at any time), feeds the chain
// and writes its images back. A session never affects another one: everything it owns is here.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "gadgets/chain.h"
#include "gadgets/noise_dependency_store.h"
#include "gadgets/precompute_cache.h"
#include "server/chain_catalog.h"
#include "server/connection_slots.h"
#include "server/device_pool.h"
#include "server/log_throttle.h"
#include "server/memory_admission.h"
#include "server/server_options.h"
#include "server/socket_io.h"
#include "server/stats.h"

namespace spdlog {
class logger;
}

namespace larmor::server {

class TlsContext;

// What every session shares with the server. Held by shared_ptr so a session that outlives an
// orderly shutdown never points at freed memory.
struct SessionEnvironment {
    ServerOptions options;
    // options.max_header_bytes / max_config_bytes as bytes (resolved when the server starts).
    uint64_t max_header_bytes = 4u << 20, max_config_bytes = 1u << 20;
    ServerStats stats;
    std::unique_ptr<DevicePool> devices;  // from options.devices; never null once the server runs
    std::shared_ptr<const NoiseDependencyStore> dependencies;  // at options.dependency_dir; null: none
    std::shared_ptr<PrecomputeCache> precompute;  // from options.precompute_*; never null once the server runs
    RecentErrors recent_errors;  // for the status page
    std::unique_ptr<ServerMemory> memory;  // from options.memory; never null once the server runs
    std::unique_ptr<ChainCatalog> chains;  // options.config_dir as last (re)loaded; never null once running
    std::shared_ptr<TlsContext> tls;  // from options.security.tls; null: plain TCP
    std::unique_ptr<ConnectionSlots> slots;  // sessions and pending connections; never null once running
    // Sessions turned away at their chain config (session limits) write at most 20 lines per 10 s.
    std::mutex turn_away_log_mutex;
    LogThrottle turn_away_log{20, std::chrono::seconds(10)};
};

// The gate (wire::PayloadGate) decides about each message's payload before it is read: data before the
// header or after an error are dropped unread, XML over its limit and payloads the session's memory
// budget cannot hold are refused as they are announced, and what is read is charged to the budget.
class Session final : private wire::PayloadGate {
public:
    // `socket` is the accepted connection, created on `ioc`: the session's private io_context,
    // which only ever runs on the session's own thread. It is one of env->slots' pending connections
    // (from `address`, empty when unknown), connected at `connected_at`: it takes a session slot when
    // its chain config comes, and gives back whichever it holds when it ends.
    Session(std::string id, std::unique_ptr<boost::asio::io_context> ioc, boost::asio::ip::tcp::socket socket,
            std::shared_ptr<SessionEnvironment> env, std::string address,
            std::chrono::steady_clock::time_point connected_at);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Runs the whole session on the calling thread; returns once the connection is closed.
    void run() noexcept;

    // From any thread (server shutdown): the session stops reading, tells its client why and ends.
    void request_stop() noexcept;

    bool finished() const { return finished_; }
    const std::string& id() const { return id_; }

    // What the status page shows of a running session; safe from any thread.
    struct Live {
        std::string id, peer, chain, last_text;
        std::string thumbnail;  // the latest image as a data: URI (server/thumbnail.h); empty before one
        double seconds = 0;
        uint64_t acquisitions = 0, images = 0;
    };
    Live live() const;
    // Whether a whole message has arrived from the client yet (thread-safe): at shutdown a connection
    // that has sent nothing is ended at once instead of holding the grace period.
    bool heard_from() const { return heard_from_; }

private:
    enum class State {
        AwaitConfig,  // nothing yet: CONFIG_FILE or CONFIG_SCRIPT expected
        AwaitHeader,  // chain loaded: PARAMETER_SCRIPT expected (or CLOSE: dependency query)
        Streaming,    // chain running: acquisitions, waveforms, images
        Discarding,   // a framed error happened: read and drop everything until CLOSE
    };

    void serve();  // the message loop; returns when the session is over
    // wire::PayloadGate: what becomes of the payload being announced (see the class comment).
    wire::PayloadVerdict admit(const wire::PayloadInfo& payload) override;
    wire::PayloadVerdict refuse(const char* where, std::string why);
    // Charges the payload to the session's host budget while it is received and handled.
    wire::PayloadVerdict charge(const wire::PayloadInfo& payload);
    // The largest data message the session takes: what it was admitted for, or 64 MiB at least.
    uint64_t receive_allowance() const;
    // Parses the header (or a CONFIG_SCRIPT chain) with its parse cost charged to the session's
    // budget first (server/parse_cost.h); MemoryBudgetExceeded when it cannot have it.
    ISMRMRD::IsmrmrdHeader parse_header_charged(const std::string& xml);
    // Handles one message; returns false when the session is over (CLOSE).
    bool dispatch(wire::WireMessage& msg);

    void on_query(const wire::Query& q);
    void on_config(const std::string& what, const std::string& text, bool is_file);
    void on_header(const std::string& xml);
    void on_data(Message msg, const char* kind);
    // Whether a session that cannot have its CUDA backend may run on the CPU (chain cpu_fallback).
    bool may_fall_back() const;
    // Backends on the other devices of --devices for a chain that splits across devices, each admitted
    // there for an even share of `need`; a device that cannot take its share is left out (logged and
    // told to the client) and the split runs on the devices it has.
    std::vector<std::shared_ptr<Backend>> peer_backends(uint64_t need, const std::string& declared);
    void on_unexpected(const std::string& kind);
    void on_close();
    // Answers the dependency pre-query with DEPENDENCY_QUERY, then CLOSE (never TEXT: see protocol.md).
    void answer_dependency_query();

    // Records a framed error: logged, written to the client at once (report_error), the rest of the
    // input is discarded until the client's CLOSE.
    void fail(const std::string& where, const std::string& what);
    // The header came (or the session failed before it): the handshake deadline gives way to the
    // floor on the data rate (--handshake-timeout, --min-data-rate).
    void handshake_done();
    // The stream lost its framing (or the peer is gone): reply at once and end the session.
    void abort_session(const std::string& where, const std::string& what);

    // "[Summary] ...": the session's acquisitions, received = used + discarded (and why).
    std::string summary() const;
    // Writes an error TEXT to the client now, without waiting on it: from the session thread (fail)
    // and from gadget threads (the chain's error hook). Each error once; counted in stats.errors.
    void report_error(const std::string& text);
    // Sends the errors report_error could not hand to the writer, `notes`, the summary, then CLOSE;
    // nothing can follow. Then closes the connection.
    // `dropped_because`: the ledger's reason for acquisitions a chain that did not drain still held.
    void reply_and_close(const std::vector<std::string>& notes, const std::string& dropped_because);

    // Takes a --max-sessions slot for the chain config that came (the connection was pending until
    // now); false when the session or address limit turns it away, which has then been told.
    bool take_slot();
    // Gives back what the connection holds under env_->slots (a session slot or its pending place;
    // once), before its client sees the connection end.
    void release_slot();

    // chain_name_ is written only here, under live_lock_; the session's own thread reads it without.
    void set_chain_name(std::string name);
    // Called by the chain's last gadget thread with each output message.
    void deliver(Message msg);
    bool send(const wire::WireMessage& msg);

    const std::string id_;
    const std::string peer_;
    const std::string address_;  // the client's address (connection_slots.h), empty when unknown
    std::shared_ptr<SessionEnvironment> env_;
    std::shared_ptr<spdlog::logger> log_;

    std::unique_ptr<boost::asio::io_context> ioc_;
    std::unique_ptr<Transport> transport_;  // plain TCP or TLS (tls_transport.h)
    SocketWriter writer_;  // declared before chain_: the chain's sink writes through it
    SocketReader reader_;

    State state_ = State::AwaitConfig;
    std::string chain_name_;
    bool dependency_query_ = false;  // Gadgetron's NoiseSummaryGadget pre-query (dependency_query.h)
    std::string dependency_id_;      // the measurement it asks about
    bool use_cuda_ = false;
    std::atomic<bool> output_enabled_{true};  // off after a session error: no partial results

    std::vector<std::string> errors_;  // the session's own, "[where] ERROR: what", in order
    std::atomic<size_t> chain_errors_{0};  // the chain's (its error hook), for the session's log line
    std::mutex report_mutex_;  // unsent_errors_, replied_: the session thread and gadget threads report
    std::vector<std::string> unsent_errors_;  // not posted (no writer thread to be had): sent at the end
    bool replied_ = false;  // reply_and_close has begun: a later error could only follow its CLOSE
    std::atomic<bool> stop_requested_{false};
    std::atomic<bool> finished_{false};
    std::atomic<bool> heard_from_{false};
    std::atomic<bool> slot_released_{false};
    bool slot_taken_ = false;   // it became a session (take_slot); the session thread's alone
    bool turned_away_ = false;  // refused a slot: its lines are debug, the refusal is logged throttled
    bool over_ = false;         // replied and closed from within dispatch (a turn-away): serve() ends

    std::atomic<uint64_t> acquisitions_{0};
    uint64_t waveforms_ = 0, discarded_ = 0;
    const std::chrono::steady_clock::time_point created_;  // when the client connected
    mutable std::mutex live_lock_;  // chain_name_'s writes, live_text_: live() reads them from another thread
    std::string live_text_;
    std::string live_thumbnail_;  // under live_lock_
    std::chrono::steady_clock::time_point thumbnail_made_{};
    bool header_received_ = false;
    // What became of each acquisition (gadgets/acquisition_ledger.h): the gadgets record theirs
    // through the SessionContext, the session what it drops itself.
    std::shared_ptr<AcquisitionLedger> ledger_ = std::make_shared<AcquisitionLedger>();
    uint64_t trajectories_ignored_ = 0;  // acquisitions with trajectories on a chain that uses none
    std::atomic<uint64_t> images_sent_{0}, texts_sent_{0}, dropped_outputs_{0};

    // The session's host budget from its first byte: messages being received and their parsing are
    // charged to it before the header; the header's admission then claims what the chain needs.
    std::shared_ptr<MemoryBudget> host_budget_;
    BudgetCharge in_flight_;  // the payload of the message being read and dispatched
    uint64_t admitted_need_ = 0;  // the chain's estimate at admission (receive_allowance)
    std::string admitted_for_;    // what that estimate was made of (declared_size), for refusals
    const char* refusal_where_ = "Protocol";  // the "[where]" of the gate's last refusal
    uint32_t refused_scan_ = AcquisitionLedger::kUnknownScan;  // the acquisition it refused
    // Admitted by env_->memory when the header arrived; the backend charges its arrays to them.
    MemoryBudgets budgets_;

    // The CUDA device this session's backend runs on (empty for CPU). Given back after the chain
    // (which holds the backend) is gone.
    DeviceLease device_lease_;
    // Last, so it is destroyed first: its gadget threads call deliver(), which uses the members above.
    std::unique_ptr<ChainRunner> chain_;
};

}  // namespace larmor::server
