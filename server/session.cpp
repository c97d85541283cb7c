#include "server/session.h"
#include "server/thumbnail.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <type_traits>

#include <spdlog/spdlog.h>

#include "gadgets/chain_config.h"
#include "server/acquisition_checks.h"
#include "server/backend_select.h"
#include "server/dependency_query.h"
#include "server/excerpt.h"
#include "server/header_parse.h"
#include "server/parse_cost.h"
#include "server/queries.h"
#include "server/tls_transport.h"

namespace larmor::server {
namespace {

// A query key is a name ("gadgetron::info", "larmor::status"); nothing longer is answered.
constexpr uint64_t kMaxQueryKeyBytes = 64u << 10;
// One data message may take what the session was admitted for, or this much when that is less: a
// passthrough chain declares nothing, yet takes readouts of 65535 samples x 128 channels.
constexpr uint64_t kReceiveAllowanceFloor = 64u << 20;

// After the final CLOSE the client normally closes at once; a client that does not gets this long
// before the server closes anyway (see SocketReader::discard_until_eof).
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 64u << 20;

std::string endpoint_text(const boost::asio::ip::tcp::socket& s) {
    boost::system::error_code ec;
    const auto ep = s.remote_endpoint(ec);
    if (ec) return "unknown-peer";
    std::ostringstream out;
    out << ep;  // "1.2.3.4:5" or "[::1]:5"
    return out.str();
}

std::string error_text(const std::string& where, const std::string& what) { return "[" + where + "] ERROR: " + what; }

// A TEXT as it goes on the wire. Every TEXT ends with a newline: Gadgetron's clients print TEXT as it
// comes, without adding one.
std::vector<uint8_t> encoded_text(const std::string& text) {
    if (!text.empty() && text.back() == '\n') return wire::encode(Text{text});
    return wire::encode(Text{text + "\n"});
}

// Wire name of a decoded message ("ACQUISITION(1008)"), from the variant alternative.
std::string message_name(const wire::WireMessage& m) {
    static constexpr uint16_t kIds[] = {wire::kConfigFile, wire::kConfigScript,    wire::kParameterScript,
                                        wire::kClose,      wire::kText,            wire::kQuery,
                                        wire::kResponse,   wire::kAcquisition,     wire::kWaveform,
                                        wire::kImage,      wire::kDependencyQuery, wire::kDicomWithName};
    static_assert(std::size(kIds) == std::variant_size_v<wire::WireMessage>, "one id per WireMessage alternative");
    return wire::id_name(kIds[m.index()]);
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
    return out;
}

// "a, b, c" of the chains in `dir`, or why they cannot be listed (never throws: used in error texts).
// "chain 'default.xml' for an encoded matrix of 1024 x 1024 x 64 with 8 receiver channels": what
// the admission estimate is made of, named in a refusal.
std::string declared_size(const ISMRMRD::IsmrmrdHeader& h, const std::string& chain) {
    std::string matrices;
    for (const auto& e : h.encoding) {
        const auto& m = e.encodedSpace.matrixSize;
        matrices += (matrices.empty() ? "" : ", ") + std::to_string(m.x) + " x " + std::to_string(m.y) + " x " +
                    std::to_string(m.z);
    }
    const auto& sys = h.acquisitionSystemInformation;
    const std::string channels = sys && sys->receiverChannels ? std::to_string(*sys->receiverChannels) : "1 (not stated)";
    return "chain '" + chain + "' for an encoded matrix of " + (matrices.empty() ? "(none)" : matrices) + " with " +
           channels + " receiver channels";
}

// A chain that places readouts by encode-step counters cannot reconstruct a radial or spiral scan:
// refused with the header's own word for the trajectory instead of a plausible-looking wrong image.
void check_cartesian(const ISMRMRD::IsmrmrdHeader& h, const std::string& chain) {
    for (size_t i = 0; i < h.encoding.size(); ++i) {
        using T = ISMRMRD::TrajectoryType;
        const T t = h.encoding[i].trajectory;
        const char* name = t == T::RADIAL ? "radial" : t == T::GOLDENANGLE ? "goldenangle" : t == T::SPIRAL ? "spiral" : nullptr;
        if (name)
            throw HeaderError("encoding " + std::to_string(i) + " has trajectory '" + name +
                              "', but chain '" + chain + "' reconstructs Cartesian data only (it places readouts by "
                              "their encode-step counters)");
    }
}

std::string available_chains(const ChainCatalog& catalog) {
    const auto chains = catalog.names();
    return chains.empty() ? "none" : join(chains, ", ");
}

}  // namespace

Session::Session(std::string id, std::unique_ptr<boost::asio::io_context> ioc, boost::asio::ip::tcp::socket socket,
                 std::shared_ptr<SessionEnvironment> env, std::string address,
                 std::chrono::steady_clock::time_point connected_at)
    : id_(std::move(id)),
      peer_(endpoint_text(socket)),
      address_(std::move(address)),
      env_(std::move(env)),
      log_(spdlog::default_logger()->clone(id_ + " " + peer_)),
      ioc_(std::move(ioc)),
      transport_(make_transport(*ioc_, std::move(socket), env_->tls)),
      writer_(*transport_, env_->options.write_timeout),
      reader_(*transport_, env_->options.read_timeout),
      created_(connected_at),
      host_budget_(env_->memory->session_host_budget()) {}

Session::~Session() = default;

void Session::set_chain_name(std::string name) {
    std::lock_guard<std::mutex> g(live_lock_);
    chain_name_ = std::move(name);
}

Session::Live Session::live() const {
    Live l;
    l.id = id_;
    l.peer = peer_;
    {
        std::lock_guard<std::mutex> g(live_lock_);
        l.chain = chain_name_;
        l.last_text = live_text_;
        l.thumbnail = live_thumbnail_;
    }
    l.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - created_).count();
    l.acquisitions = acquisitions_.load();
    l.images = images_sent_.load();
    return l;
}

void Session::run() noexcept {
    const auto t0 = std::chrono::steady_clock::now();
    // At debug: a flood of connections must not write a line each; a session's first info line is
    // its chain (on_config).
    log_->debug("connected");
    try {
        transport_->handshake(env_->options.security.tls_handshake_timeout);  // TLS only
        if (const std::string tls = transport_->description(); !tls.empty()) log_->info("{}", tls);
        serve();
    } catch (const HandshakeError& e) {
        ++env_->stats.tls_handshakes_failed;
        log_->warn("refused: {}", e.what());
    } catch (const std::exception& e) {
        // serve() handles every expected failure itself; this is a bug, but it must not take the
        // server down: tell the client if still possible and close.
        log_->error("internal error: {}", e.what());
        try {
            abort_session("Server", std::string("internal error: ") + e.what());
        } catch (...) {
        }
    } catch (...) {
        log_->error("internal error: unknown exception");
    }
    chain_.reset();
    budgets_ = {};
    in_flight_.reset();
    host_budget_->claim(0, std::chrono::milliseconds(0));
    device_lease_.reset();
    // A client that stopped reading (or vanished) lost what was still to be sent: an error of this
    // session even when nothing else went wrong. A turn-away is not a failed session: it never was one.
    size_t errors = errors_.size() - size_t(turned_away_) + chain_errors_;
    if (writer_.failed()) {
        ++errors;
        log_->warn("[Socket] ERROR: {}", writer_.error());
    }
    writer_.close();
    if (errors) ++env_->stats.sessions_failed;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // A connection that never became a session (a query, silence, a turn-away) ends at debug level.
    log_->log(slot_taken_ || errors ? spdlog::level::info : spdlog::level::debug,
              "session ended after {:.3f} s: chain '{}', {} acquisitions, {} waveforms, {} images and {} texts sent, "
              "{} errors{}",
              secs, chain_name_.empty() ? "none" : chain_name_, acquisitions_.load(), waveforms_, images_sent_.load(),
              texts_sent_.load(), errors,
              discarded_ ? ", " + std::to_string(discarded_) + " messages discarded after the error" : std::string());
    release_slot();
    finished_ = true;
}

void Session::request_stop() noexcept {
    stop_requested_ = true;
    writer_.shutdown_receive();  // the blocked read sees EOF and serve() ends the session
}

void Session::serve() {
    const ServerOptions& o = env_->options;
    if (o.handshake_timeout.count() > 0)
        reader_.set_deadline(created_ + o.handshake_timeout,
                             "no chain config and ISMRMRD header within --handshake-timeout " +
                                 std::to_string(o.handshake_timeout.count()) + " s of connecting");
    for (;;) {
        if (writer_.failed()) {
            abort_session("Socket", writer_.error());
            return;
        }
        const uint64_t start = reader_.bytes_read();
        wire::WireMessage msg;
        refusal_where_ = nullptr;
        try {
            msg = wire::read_message(reader_, env_->options.limits, *this).message;
            heard_from_ = true;
        } catch (const std::exception& e) {
            in_flight_.reset();
            env_->stats.bytes_received += reader_.bytes_read() - start;
            const uint64_t into = reader_.bytes_read() - start;
            if (stop_requested_) {
                abort_session("Server", "larmor-server is shutting down; the session ended before the client's CLOSE");
            } else if (const auto* rejected = dynamic_cast<const wire::RejectedMessage*>(&e)) {
                // Read to its end (or dropped unread, refused by the gate), so the stream is still
                // framed: the error goes to the client now (fail), the rest is read and dropped until
                // its CLOSE, answered there with the summary and CLOSE (see fail() for why an upload
                // under way may get the TEXT). Only the first one is reported.
                heard_from_ = true;
                if (rejected->id() == wire::kAcquisition) {
                    ++acquisitions_;
                    ++env_->stats.acquisitions;
                    if (refusal_where_)
                        ledger_->discarded("refused as announced, before its samples were read (see the error)",
                                           refused_scan_);
                    else
                        ledger_->discarded("refused while decoding (see the error)", AcquisitionLedger::kUnknownScan);
                }
                if (!refusal_where_) {  // the codec's own refusal; the gate's was told already (refuse)
                    if (state_ == State::Discarding)
                        ++discarded_;
                    else
                        fail("Protocol", e.what());
                }
                continue;
            } else if (writer_.failed()) {  // the end of input came from send(): the client stopped reading
                abort_session("Socket", writer_.error());
            } else if (dynamic_cast<const wire::EndOfStream*>(&e)) {
                abort_session("Protocol", std::string("the client closed the connection without CLOSE (") + e.what() + ")");
            } else if (dynamic_cast<const ReadTimeout*>(&e)) {
                abort_session("Protocol", std::string(e.what()) +
                                              (into ? " (" + std::to_string(into) + " bytes into a message)"
                                                    : std::string(" (between messages)")));
            } else if (dynamic_cast<const wire::ProtocolError*>(&e)) {
                abort_session("Protocol", e.what());
            } else {
                abort_session("Socket", e.what());
            }
            return;
        }
        env_->stats.bytes_received += reader_.bytes_read() - start;
        log_->trace("received {} ({} bytes)", message_name(msg), reader_.bytes_read() - start);
        const bool more = dispatch(msg);
        in_flight_.reset();  // the message is handled (or queued, charged there: ChainRunner::push)
        if (!more || over_) return;
    }
}

wire::PayloadVerdict Session::admit(const wire::PayloadInfo& p) {
    using V = wire::PayloadVerdict;
    switch (p.id) {
        case wire::kAcquisition:
        case wire::kWaveform:
        case wire::kImage:
            // Before the header, after an error or once a gadget failed, data are dropped unread:
            // dispatch says why (or counts them), and holding them could only cost memory.
            if (state_ != State::Streaming || chain_->failed()) return {V::Skip, {}};
            if (p.acquisition) refused_scan_ = p.acquisition->scan_counter;
            if (p.bytes > receive_allowance())
                return refuse("Memory", wire::describe(p) + " holds " + format_bytes(p.bytes) +
                                            ", more than this session was admitted for (" + admitted_for_ +
                                            ": an estimated " + format_bytes(admitted_need_) +
                                            "; one message may take that or 64 MiB, whichever is larger); refused "
                                            "before its samples were read");
            return charge(p);
        case wire::kQuery:
            if (p.bytes > kMaxQueryKeyBytes)
                return refuse("Protocol", "QUERY key of " + std::to_string(p.bytes) + " bytes is longer than the " +
                                              std::to_string(kMaxQueryKeyBytes) + " a query key may have");
            return charge(p);
        case wire::kParameterScript:
            if (state_ != State::AwaitHeader) return {V::Skip, {}};  // on_header says why it is not wanted
            if (p.bytes > env_->max_header_bytes)
                return refuse("Header", "the ISMRMRD header (PARAMETER_SCRIPT) of " + format_bytes(p.bytes) +
                                            " is larger than --max-header-bytes " +
                                            format_bytes(env_->max_header_bytes) + "; refused unread");
            return charge(p);
        case wire::kConfigScript:
            if (state_ != State::AwaitConfig) return {V::Skip, {}};  // on_config says why
            if (p.bytes > env_->max_config_bytes)
                return refuse("Config", "CONFIG_SCRIPT(2) of " + format_bytes(p.bytes) +
                                            " is larger than --max-config-bytes " +
                                            format_bytes(env_->max_config_bytes) + "; refused unread");
            return charge(p);
        default:
            // Server-to-client messages (TEXT, RESPONSE, ...): dispatch refuses them without their payload.
            return {V::Skip, {}};
    }
}

wire::PayloadVerdict Session::refuse(const char* where, std::string why) {
    // Told now, as it is announced: the payload is still to be read (and dropped), and a client that
    // withholds its last byte would otherwise never hear why.
    refusal_where_ = where;
    fail(where, why);
    return {wire::PayloadVerdict::Refuse, std::move(why)};
}

wire::PayloadVerdict Session::charge(const wire::PayloadInfo& p) {
    try {
        in_flight_ = BudgetCharge(host_budget_, p.bytes, "a message being received");
    } catch (const MemoryBudgetExceeded& e) {
        return refuse("Memory", wire::describe(p) + ": " + e.what() + "; refused before its payload was read");
    }
    return {wire::PayloadVerdict::Keep, {}};
}

uint64_t Session::receive_allowance() const { return std::max<uint64_t>(admitted_need_, kReceiveAllowanceFloor); }

ISMRMRD::IsmrmrdHeader Session::parse_header_charged(const std::string& xml) {
    const BudgetCharge parsing(host_budget_, ismrmrd_header_parse_bound(xml),
                               "parsing the ISMRMRD header (PARAMETER_SCRIPT) of " + format_bytes(xml.size()));
    return parse_ismrmrd_header(xml);
}

bool Session::dispatch(wire::WireMessage& msg) {
    // Queries and CLOSE are valid in every state, including after an error.
    if (auto* q = std::get_if<wire::Query>(&msg)) {
        on_query(*q);
        return true;
    }
    if (std::holds_alternative<wire::Close>(msg)) {
        on_close();
        return false;
    }
    if (std::holds_alternative<Acquisition>(msg)) {
        ++acquisitions_;
        ++env_->stats.acquisitions;
    } else if (std::holds_alternative<Waveform>(msg)) {
        ++waveforms_;
        ++env_->stats.waveforms;
    }
    if (state_ == State::Discarding) {
        ++discarded_;
        if (const auto* a = std::get_if<Acquisition>(&msg))
            ledger_->discarded("received after the session's error (not reconstructed)", *a);
        return true;
    }
    if (auto* c = std::get_if<wire::ConfigFile>(&msg)) {
        on_config("CONFIG_FILE(1)", c->name, true);
    } else if (auto* s = std::get_if<wire::ConfigScript>(&msg)) {
        on_config("CONFIG_SCRIPT(2)", s->text, false);
    } else if (auto* h = std::get_if<wire::ParameterScript>(&msg)) {
        on_header(h->xml);
    } else if (auto* a = std::get_if<Acquisition>(&msg)) {
        on_data(Message(std::move(*a)), "ACQUISITION(1008)");
    } else if (auto* w = std::get_if<Waveform>(&msg)) {
        on_data(Message(std::move(*w)), "WAVEFORM(1026)");
    } else if (auto* i = std::get_if<Image>(&msg)) {
        on_data(Message(std::move(*i)), "IMAGE(1022)");  // image-domain chains take images as input
    } else {
        on_unexpected(message_name(msg));
    }
    return true;
}

void Session::on_query(const wire::Query& q) {
    const std::string answer = answer_query(q.key, QueryContext{env_->options, env_->stats, env_->devices.get(), env_->memory.get(), env_->chains.get()});
    log_->debug("query '{}' (correlation id {})", excerpt(q.key), q.correlation_id);
    send(wire::Response{q.correlation_id, answer});
}

void Session::on_config(const std::string& what, const std::string& text, bool is_file) {
    if (state_ != State::AwaitConfig) {
        fail("Session", "second chain config " + what + " after chain '" + chain_name_ +
                            "': send exactly one CONFIG_FILE(1) or CONFIG_SCRIPT(2)");
        return;
    }
    // A script's parse (the dependency query's look at it included), charged before it starts
    // (server/parse_cost.h).
    BudgetCharge parsing;
    try {
        if (!is_file)
            parsing = BudgetCharge(host_budget_, chain_script_parse_bound(text),
                                   "parsing CONFIG_SCRIPT(2) of " + format_bytes(text.size()));
    } catch (const MemoryBudgetExceeded& e) {
        fail("Memory", e.what());
        return;
    }
    if (!is_file) {
        if (auto id = noise_dependency_query_id(text)) {
            dependency_query_ = true;
            dependency_id_ = std::move(*id);
            set_chain_name("NoiseSummaryGadget (dependency query)");
            log_->info("noise dependency query for measurement '{}'", excerpt(dependency_id_));
            state_ = State::AwaitHeader;
            return;
        }
    }
    if (!take_slot()) return;
    try {
        config::Chain chain = is_file ? env_->chains->get(text)
                                      : parse_chain(text, "CONFIG_SCRIPT");
        parsing.reset();
        set_chain_name(is_file ? text : (chain.name().empty() ? std::string("inline chain") : chain.name()));
        const BackendPolicy policy = env_->options.backend;
        const bool may_use_cuda = policy != BackendPolicy::Cpu && chain.backend() != config::BACKEND_CPU;
        const bool cuda_usable = may_use_cuda && !env_->devices->empty() && cuda_available();
        use_cuda_ = choose_cuda(policy, chain.backend(), chain_name_, cuda_usable);
        chain_ = std::make_unique<ChainRunner>(chain, env_->options.queue_depth);
        log_->info("chain '{}' from {}: {} on {}", chain_name_, what, join(chain_->gadget_names(), " -> "),
                   use_cuda_ ? "cuda" : "cpu");
        state_ = State::AwaitHeader;
    } catch (const ConfigError& e) {
        fail("Config", e.what());
    } catch (const BackendError& e) {
        fail("Backend", e.what());
    } catch (const std::exception& e) {
        fail("Config", std::string("cannot build chain from ") + what + ": " + e.what());
    }
}

void Session::on_header(const std::string& xml) {
    handshake_done();
    if (state_ == State::AwaitConfig) {
        fail("Session", "PARAMETER_SCRIPT(3) (the ISMRMRD header) arrived before a chain config: send "
                        "CONFIG_FILE(1) or CONFIG_SCRIPT(2) first");
        return;
    }
    if (state_ == State::Streaming) {
        fail("Session", "second PARAMETER_SCRIPT(3): the session already has its ISMRMRD header");
        return;
    }
    if (dependency_query_) {
        fail("Session", "the NoiseSummaryGadget dependency query cannot reconstruct data; send a reconstruction "
                        "chain (available: " + available_chains(*env_->chains) + ")");
        return;
    }
    try {
        ISMRMRD::IsmrmrdHeader header = parse_header_charged(xml);
        header_received_ = true;
        if (chain_->cartesian_only()) check_cartesian(header, chain_name_);
        // Admitted before the backend exists: a refused stream has allocated nothing but its header.
        const uint64_t need = chain_->working_set(header);
        const std::string declared = declared_size(header, chain_name_);
        std::shared_ptr<Backend> backend;
        if (use_cuda_) {
            try {
                device_lease_ = env_->devices->acquire();
                budgets_ = env_->memory->admit(need, device_lease_.device(), declared, host_budget_);
                backend = make_session_backend(true, device_lease_.device(), budgets_);
            } catch (const std::exception& e) {
                if (!may_fall_back()) throw;
                const std::string note = std::string("[Backend] ") + e.what() +
                                         ": running on the CPU backend instead (the chain sets cpu_fallback)";
                log_->warn("{}", note);
                send(Text{note});
                device_lease_.reset();
                budgets_ = {};
                use_cuda_ = false;
            }
        }
        if (!use_cuda_) {
            budgets_ = env_->memory->admit(need, -1, declared, host_budget_);
            backend = make_session_backend(false, -1, budgets_);
        }
        admitted_need_ = need;
        admitted_for_ = declared;
        std::vector<std::shared_ptr<Backend>> peers;
        if (use_cuda_ && chain_->splits_across_devices()) peers = peer_backends(need, declared);
        log_->info("ISMRMRD header: {} encoding(s), {} bytes; backend {}{}{}", header.encoding.size(), xml.size(),
                   backend->describe(),
                   use_cuda_ ? " (CUDA device " + std::to_string(device_lease_.device()) + ")" : std::string(),
                   peers.empty() ? std::string() : ", split across " + std::to_string(peers.size() + 1) + " devices");
        // A gadget's error reaches the client when it happens, from the gadget's thread.
        chain_->set_error_hook([this](const std::string& e) {
            ++chain_errors_;
            report_error(e);
        });
        chain_->start(
            SessionContext{std::move(header), xml, std::move(backend), id_, chain_name_, env_->dependencies, ledger_,
                           env_->precompute, std::move(peers)},
            [this](Message m) { deliver(std::move(m)); });
        state_ = State::Streaming;
    } catch (const HeaderError& e) {
        fail("Header", e.what());
    } catch (const MemoryBudgetExceeded& e) {
        fail("Memory", e.what());
    } catch (const AdmissionError& e) {
        device_lease_.reset();
        ++env_->stats.sessions_over_budget;
        fail("Memory", e.what());
    } catch (const BackendError& e) {
        device_lease_.reset();
        fail("Backend", e.what());
    } catch (const std::exception& e) {
        fail("Session", std::string("cannot start chain '") + chain_name_ + "': " + e.what());
    }
}

std::vector<std::shared_ptr<Backend>> Session::peer_backends(uint64_t need, const std::string& declared) {
    std::vector<std::shared_ptr<Backend>> peers;
    const std::vector<DeviceLoad> devices = env_->devices->load();
    if (devices.size() < 2) return peers;
    const uint64_t share = need / devices.size() + 1;
    for (const DeviceLoad& d : devices) {
        if (d.device == device_lease_.device()) continue;
        try {
            MemoryBudgets b = env_->memory->admit(share, d.device, declared);
            b.host = budgets_.host;  // one host budget for the whole session
            peers.push_back(make_session_backend(true, d.device, std::move(b)));
        } catch (const std::exception& e) {
            const std::string note = "[Backend] CUDA device " + std::to_string(d.device) +
                                     " is left out of this session's split: " + e.what();
            log_->warn("{}", note);
            send(Text{note});
        }
    }
    return peers;
}

bool Session::may_fall_back() const {
    return chain_->cpu_fallback() && chain_->backend_choice() != config::BACKEND_CUDA &&
           env_->options.backend != BackendPolicy::Cuda;
}

void Session::on_data(Message msg, const char* kind) {
    const Acquisition* acq = std::get_if<Acquisition>(&msg);
    if (state_ != State::Streaming) {
        if (acq) ledger_->discarded("received before the ISMRMRD header", *acq);
        fail("Session", std::string(kind) + " arrived before the ISMRMRD header: send " +
                            (state_ == State::AwaitConfig ? "CONFIG_FILE(1) or CONFIG_SCRIPT(2), then " : "") +
                            "PARAMETER_SCRIPT(3) first");
        return;
    }
    if (chain_->failed()) {  // the chain drops it anyway; skip the queue hop
        ++discarded_;
        if (acq) ledger_->discarded("dropped after a gadget failed (see the error)", *acq);
        return;
    }
    if (acq) {
        const DoorVerdict v = check_acquisition(*acq);
        if (v.kind == DoorVerdict::Refuse) {
            ledger_->discarded("refused: contradictory header fields (see the error)", *acq);
            fail("Acquisition", v.reason);
            return;
        }
        if (v.kind == DoorVerdict::Discard) {
            ++discarded_;
            ledger_->discarded(v.reason, *acq);
            return;
        }
        if (!acq->traj.empty() && !chain_->uses_trajectories()) ++trajectories_ignored_;
    }
    try {
        // The payload's charge goes with it into the chain (one reservation per message).
        chain_->push(std::move(msg), std::move(in_flight_));  // blocks while the chain is busy: backpressure
    } catch (const std::exception& e) {
        fail("Session", std::string("cannot pass ") + kind + " to chain '" + chain_name_ + "': " + e.what());
    }
}

void Session::on_unexpected(const std::string& kind) {
    fail("Protocol", kind + " is a server-to-client message; a client must not send it");
}

void Session::on_close() {
    std::vector<std::string> notes;
    if (state_ == State::Streaming) {
        log_->debug("CLOSE: draining the chain");
        chain_->close_and_wait();
    } else if (state_ == State::AwaitHeader && dependency_query_) {
        answer_dependency_query();
        return;
    } else if (state_ == State::AwaitHeader) {
        notes.push_back("[Session] chain '" + chain_name_ +
                        "' loaded, but no ISMRMRD header (PARAMETER_SCRIPT) arrived: nothing to reconstruct");
    }
    // Discarding: the chain (if it was running) is aborted in reply_and_close; no partial result.
    reply_and_close(notes, "in the chain when the session failed (not reconstructed)");
}

void Session::answer_dependency_query() {
    const DependencyAnswer a = answer_noise_dependency_query(dependency_id_, env_->dependencies.get());
    // A miss is no error: Gadgetron answers "failed" and the client goes on (and warns its user).
    log_->info("noise dependency query for measurement '{}': {} ({})", excerpt(dependency_id_),
               a.found ? "success" : "failed", a.detail);
    send(wire::DependencyQuery{a.meta_xml});
    reply_and_close({}, {});
}

// The error is written at once, while the client may still be uploading, and the connection stays
// open: the rest of the stream is read and dropped until the client's CLOSE, answered with the summary
// and CLOSE as before. Answering into an upload under way is safe for the clients in use; what broke
// Gadgetron 4.1's clients (protocol.md, "Known weaknesses") was TEXT + CLOSE followed by closing the
// socket with the client's data unread: the kernel resets the connection and the client's next write
// fails (broken pipe). A TEXT alone does not: gadgetron_ismrmrd_client, HEAD and v4.1, reads on its own
// thread from connect() on (read_task in ../shared/tools/gadgetron-client/src/*/client.cpp) and prints
// each TEXT as it comes, beside the upload; larmor-client reads on its own thread too
// (tools/client/session.cpp). A client that reads nothing until it has sent everything finds the TEXT
// (a few hundred bytes) waiting in its socket buffer at the end, as before. The write goes through the
// writer's own thread (SocketWriter::post), so not even a client whose receive buffer is full can
// stall this reading thread and, through it, its own upload; such a client is ended by --write-timeout
// as it would be for an image.
void Session::handshake_done() {
    const ServerOptions& o = env_->options;
    reader_.clear_deadline();
    if (o.min_data_rate > 0)
        reader_.set_min_rate(o.min_data_rate, o.min_data_rate_window,
                             "data rate below --min-data-rate " + std::to_string(o.min_data_rate) +
                                 " bytes/s (averaged over --min-data-rate-window " +
                                 std::to_string(o.min_data_rate_window.count()) + " s)");
}

void Session::fail(const std::string& where, const std::string& what) {
    handshake_done();  // the rest is read and dropped until CLOSE, as long as it keeps coming
    errors_.push_back(error_text(where, what));
    log_->warn("{}; discarding input until the client's CLOSE", errors_.back());
    state_ = State::Discarding;
    output_enabled_ = false;
    report_error(errors_.back());
}

void Session::abort_session(const std::string& where, const std::string& what) {
    errors_.push_back(error_text(where, what));
    log_->warn("{}; ending the session now", errors_.back());
    state_ = State::Discarding;
    output_enabled_ = false;
    report_error(errors_.back());
    reply_and_close({}, stop_requested_ ? "dropped at shutdown (the server stopped before the client's CLOSE)"
                                        : "dropped when the session ended before the client's CLOSE (see the error)");
}

void Session::report_error(const std::string& text) {
    std::lock_guard<std::mutex> lock(report_mutex_);
    if (replied_) return;  // the final reply is under way: nothing may follow its CLOSE
    ++env_->stats.errors;
    env_->recent_errors.add(id_, text);
    if (!writer_.post(encoded_text(text))) unsent_errors_.push_back(text);
}

void Session::reply_and_close(const std::vector<std::string>& notes, const std::string& dropped_because) {
    // Every error known so far was posted already (send() below waits until those are on the wire,
    // so they precede the rest); only those that could not be posted are sent here. A gadget failing
    // from now on (an aborted chain) is logged but no longer told: its TEXT could follow CLOSE.
    std::vector<std::string> texts;
    {
        std::lock_guard<std::mutex> lock(report_mutex_);
        replied_ = true;
        texts.swap(unsent_errors_);
    }
    for (const auto& t : texts) send(Text{t});
    for (const auto& n : notes) send(Text{n});
    // A chain that did not drain (the session ends early, or failed) is stopped before the summary is
    // made, so what it still held is counted as dropped, not as "still in the chain". Its output is
    // off already (fail, abort_session), so nothing of it reaches the client.
    if (chain_) chain_->abort(dropped_because);
    // Every session that got as far as data says what became of it; the dependency pre-query
    // (answered with DEPENDENCY_QUERY and CLOSE only, protocol.md) never does.
    if ((header_received_ || acquisitions_ > 0) && !dependency_query_) {
        const std::string s = summary();
        log_->info("{}", s);
        send(Text{s});
    }
    writer_.send_last(wire::encode(wire::Close{}));  // sealed with it: no late image can follow CLOSE
    if (writer_.failed()) log_->warn("reply not delivered: {}", writer_.error());
    chain_.reset();  // aborts the chain if it still runs, joins its threads
    // Its arrays are gone with the chain: give the memory claim back now, not when the server
    // reaps this session, so the next client is admitted at once.
    budgets_ = {};
    host_budget_->claim(0, std::chrono::milliseconds(0));  // its claim on the server goes with the chain
    device_lease_.reset();
    // The work is done: give the --max-sessions slot back before the FIN, so a client that saw the
    // connection end also sees the session gone, and the linger below keeps no new client out.
    release_slot();
    writer_.shutdown_send();
    reader_.discard_until_eof(kLingerTime, kLingerBytes);
    writer_.close();
}

std::string Session::summary() const {
    std::string s = "[Summary] " + ledger_->summary(acquisitions_);
    if (trajectories_ignored_)
        s += "; " + std::to_string(trajectories_ignored_) + " carried trajectories that chain '" + chain_name_ +
             "' does not use (placed by their encode-step counters)";
    if (waveforms_) s += "; " + std::to_string(waveforms_) + " waveforms";
    return s;
}

bool Session::take_slot() {
    size_t running = 0;
    const ConnectionSlots::Verdict v = env_->slots->promote(address_, running);
    if (v == ConnectionSlots::Verdict::Ok) {
        slot_taken_ = true;
        return true;
    }
    const SlotLimits& limits = env_->slots->limits();
    std::string text, line;
    if (v == ConnectionSlots::Verdict::ServerFull) {
        ++env_->stats.sessions_rejected;
        text = "larmor-server is at its session limit (--max-sessions " + std::to_string(limits.sessions) +
               "); try again later";
        line = "turning away " + peer_ + ": " + std::to_string(running) + " sessions active (--max-sessions " +
               std::to_string(limits.sessions) + ")";
    } else {
        ++env_->stats.per_address_refused;
        text = "larmor-server already runs " + std::to_string(running) + " sessions from " + address_ +
               " (--max-sessions-per-address " + std::to_string(limits.sessions_per_address) +
               "); try again when one has ended";
        line = "turning away " + peer_ + ": " + std::to_string(running) + " sessions from that address "
               "(--max-sessions-per-address " + std::to_string(limits.sessions_per_address) + ")";
    }
    {
        // A burst of connections to a full server must not write a line each.
        std::lock_guard<std::mutex> lock(env_->turn_away_log_mutex);
        uint64_t left_out = 0;
        if (env_->turn_away_log.allow(left_out))
            log_->warn("{}{}", line,
                       left_out ? "; " + std::to_string(left_out) +
                                      " turned away before this one were not logged (at most 20 lines per 10 s)"
                                : std::string());
    }
    turned_away_ = true;
    over_ = true;
    state_ = State::Discarding;
    output_enabled_ = false;
    errors_.push_back(error_text("Server", text));
    reply_and_close({errors_.back()}, {});
    return false;
}

void Session::release_slot() {
    if (slot_released_.exchange(true)) return;
    if (slot_taken_)
        env_->slots->end_session(address_);
    else
        env_->slots->drop_pending(address_);
}

void Session::deliver(Message msg) {
    if (!output_enabled_) {
        // An acquisition that reaches the end of a chain whose output is off (the session failed or is
        // ending) is still accounted for, or the summary would call it "still in the chain".
        if (const auto* a = std::get_if<Acquisition>(&msg))
            ledger_->discarded("reached the end of the chain unused", *a);
        else if (const auto* p = std::get_if<PendingAcquisition>(&msg))
            ledger_->discarded("reached the end of the chain unused", p->acq);
        ++dropped_outputs_;
        return;
    }
    if (auto* image = std::get_if<Image>(&msg)) {
        // The status page's picture of the latest image, at most once a second (a real-time chain sends
        // thousands of frames a second; a thumbnail of 256^2 costs about 0.1 ms).
        const auto now = std::chrono::steady_clock::now();
        if (now - thumbnail_made_ >= std::chrono::seconds(1)) {
            thumbnail_made_ = now;
            std::string thumbnail = thumbnail_data_uri(*image);
            std::lock_guard<std::mutex> g(live_lock_);
            live_thumbnail_ = std::move(thumbnail);
        }
        if (send(std::move(*image))) {
            ++images_sent_;
            ++env_->stats.images_sent;
        }
    } else if (auto* dicom = std::get_if<DicomWithName>(&msg)) {
        // A DICOM image (the DicomFinish gadget): counted with the images, as Gadgetron's client does.
        if (send(std::move(*dicom))) {
            ++images_sent_;
            ++env_->stats.images_sent;
        }
    } else if (auto* text = std::get_if<Text>(&msg)) {
        {
            std::lock_guard<std::mutex> g(live_lock_);
            live_text_ = text->text.substr(0, 200);
        }
        if (send(std::move(*text))) ++texts_sent_;
    } else {
        if (const auto* a = std::get_if<Acquisition>(&msg))
            ledger_->discarded("reached the end of the chain unused", *a);
        else if (const auto* p = std::get_if<PendingAcquisition>(&msg))
            ledger_->discarded("reached the end of the chain unused", p->acq);
        const uint64_t n = ++dropped_outputs_;
        log_->debug("dropped a {} at the end of the chain ({} so far): only images, DICOM and text go to the client",
                    message_kind(msg), n);
    }
}

bool Session::send(const wire::WireMessage& msg) {
    // encode() throws on a malformed image; from deliver() that fails the gadget that produced it.
    const bool sent = writer_.send(std::holds_alternative<Text>(msg) ? encoded_text(std::get<Text>(msg).text)
                                                                     : wire::encode(msg));
    // A client that stopped reading may have stopped sending too: wake the reading thread now (it sees
    // the end of input and ends the session for the write timeout), not at its read timeout.
    if (!sent && writer_.failed()) writer_.shutdown_receive();
    return sent;
}

}  // namespace larmor::server
