#include "gadgets/chain.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "chain.pb.h"
#include "gadgets/bounded_queue.h"
#include "gadgets/chain_config.h"
#include "gadgets/chain_metrics.h"
#include "gadgets/factories.h"

namespace larmor {
namespace {

// The scan_counter of an acquisition (plain or with pending line operations); nothing for the rest.
std::optional<uint32_t> acquisition_scan(const Message& m) {
    // Copied out first: the ISMRMRD header is packed, and optional binds a reference to its argument.
    if (const auto* a = std::get_if<Acquisition>(&m)) return uint32_t{a->head.scan_counter};
    if (const auto* p = std::get_if<PendingAcquisition>(&m)) return uint32_t{p->acq.head.scan_counter};
    return std::nullopt;
}
constexpr const char* kAfterFailure = "dropped after a gadget failed (see the error)";

// Acquisitions a buffer or image carries towards an image (ReconBuffer / TrajectoryBuffer / ImageArray
// ::acquisitions): when a gadget fails on it, they are counted as used but never reaching an image.
uint64_t acquisitions_carried(const Message& m) {
    if (const auto* r = std::get_if<ReconBuffer>(&m)) return r->acquisitions;
    if (const auto* t = std::get_if<TrajectoryBuffer>(&m)) return t->acquisitions;
    if (const auto* i = std::get_if<ImageArray>(&m)) return i->acquisitions;
    return 0;
}

// A queue item: a message, or the end-of-stream marker (nullopt) that drains the chain in order.
using Item = std::optional<Message>;

constexpr const char* kQueuedWhat = "a message waiting in a gadget's input queue";
constexpr auto kRoomPoll = std::chrono::milliseconds(20);
}  // namespace

struct ChainRunner::Impl {
    struct Stage;

    // A queued message with its host payload charged to the session's budget: 64 queued readouts of
    // 16 MiB each are a gigabyte, which only the budget can stop. (A member, not in the anonymous
    // namespace: Stage holds a queue of them, and the unity builds would warn of the linkage.)
    struct Queued {
        Item item;
        BudgetCharge charge;
    };

    // Forwards a gadget's output to the next stage's queue, or to the sink after the last stage.
    class StageEmitter final : public Emitter {
    public:
        StageEmitter(Impl& impl, size_t index) : impl_(impl), index_(index) {}
        void emit(Message msg) override {
            if (index_ + 1 < impl_.stages.size()) {
                Stage& next = *impl_.stages[index_ + 1];
                const std::optional<uint32_t> scan = acquisition_scan(msg);
                BudgetCharge charge = impl_.charge_for(msg, next, impl_.stages[index_]->in_hand);
                // Refused only once the chain is aborted: the acquisition is dropped with the rest.
                if (!next.queue.push(Queued{Item(std::move(msg)), std::move(charge)}) && scan)
                    impl_.dropped_at_abort(*scan);
            } else if (impl_.sink) {
                impl_.sink(std::move(msg));
            }
        }

    private:
        Impl& impl_;
        size_t index_;
    };

    struct Stage {
        Stage(std::unique_ptr<Gadget> g, std::string n, size_t capacity)
            : gadget(std::move(g)), name(std::move(n)), queue(capacity), timing(gadget_timing(name)) {}
        std::unique_ptr<Gadget> gadget;
        std::string name;
        BoundedQueue<Queued> queue;
        std::thread thread;
        bool failed = false;  // touched only by the stage's own thread
        // The charge of the message process() works on (stage thread only): a message passed on
        // takes it along to the next queue instead of charging the budget anew (one reservation per
        // message through the whole chain); what is left goes when process() returns.
        BudgetCharge in_hand;
        GadgetTiming& timing;  // the process-wide histogram of this gadget's process() calls
    };
    uint64_t queue_reporter = 0;  // registered while the stages run (chain_metrics.h)

    std::vector<std::unique_ptr<Stage>> stages;
    ChainSink sink;
    SessionContext ctx;
    std::shared_ptr<MemoryBudget> host_budget;  // the session's, from ctx.backend (null: not bounded)
    int backend = 0;
    bool cpu_fallback = false;
    bool started = false;
    bool closed = false;

    mutable std::mutex error_mutex;
    std::vector<std::string> error_list;
    std::atomic<bool> any_failed{false};
    ChainErrorHook error_hook;  // set before the threads start, read-only after

    void record_error(const std::string& where, const std::string& what) {
        {
            std::lock_guard<std::mutex> lock(error_mutex);
            error_list.push_back("[" + where + "] ERROR: " + what);
            // Under the lock, so two gadgets failing at once reach the hook in error_list's order.
            // A throwing hook must not end the gadget thread (std::terminate): the error stays listed.
            if (error_hook) {
                try {
                    error_hook(error_list.back());
                } catch (...) {
                }
            }
        }
        any_failed = true;
        spdlog::error("session {}: gadget {} failed: {}", ctx.session_id, where, what);
    }

    // Runs a gadget call, turning any exception into a recorded error and marking the stage failed
    // so that it discards its remaining input instead of stalling the chain.
    template <typename F>
    void guarded(Stage& s, F&& f) {
        if (s.failed) return;
        try {
            f();
        } catch (const std::exception& e) {
            s.failed = true;
            record_error(s.name, e.what());
        } catch (...) {
            s.failed = true;
            record_error(s.name, "unknown exception");
        }
    }

    void run_stage(size_t index) {
        Stage& s = *stages[index];
        StageEmitter out(*this, index);
        guarded(s, [&] { s.gadget->start(ctx); });
        for (;;) {
            std::optional<Queued> queued = s.queue.pop();
            if (!queued) return;  // aborted
            if (!queued->item.has_value()) break;
            // In the gadget's hands now, still charged (in_hand); a gadget that keeps it charges its
            // own copy (accumulators).
            s.in_hand = std::move(queued->charge);
            Message& msg = *queued->item;  // moved into process() below
            const std::optional<uint32_t> scan = acquisition_scan(msg);
            const uint64_t carried = acquisitions_carried(msg);
            const bool dropped = s.failed;
            const auto t0 = std::chrono::steady_clock::now();
            guarded(s, [&] { s.gadget->process(std::move(msg), out); });
            s.in_hand.reset();
            s.timing.record(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            if (carried && s.failed) ctx.ledger->failed(carried);
            // An acquisition that met a failed stage, or made it fail, goes no further.
            if (scan && s.failed)
                ctx.ledger->discarded(dropped ? std::string(kAfterFailure) : "lost when " + s.name + " failed on it", *scan);
        }
        guarded(s, [&] { s.gadget->finish(out); });
        if (index + 1 < stages.size()) stages[index + 1]->queue.push(Queued{Item(), {}});
    }

    // The charge of `msg` waiting in `target`'s queue. A budget that is full while the queue holds
    // messages is backpressure: wait until the gadget takes one, as for a full queue. Full with the
    // queue empty, nothing will give room: the error names the bytes and the budget.
    // `carried`: the charge of the message a gadget is handling (or of what came off the socket),
    // taken along when `msg` is that message passed on, i.e. about its size (a note the gadget emits
    // beside it does not take it).
    BudgetCharge charge_for(const Message& msg, Stage& target, BudgetCharge& carried) {
        const uint64_t bytes = host_payload_bytes(msg);
        if (!host_budget || bytes == 0) return {};
        if (carried.bytes() >= bytes && 2 * bytes >= carried.bytes()) return std::move(carried);
        for (;;) {
            try {
                return BudgetCharge(host_budget, bytes, kQueuedWhat);
            } catch (const MemoryBudgetExceeded& e) {
                if (!target.queue.wait_for_pop(kRoomPoll))
                    throw MemoryBudgetExceeded(std::string(message_kind(msg)) + " for " + target.name + ": " + e.what(),
                                               e.requested(), e.limit(), e.in_use());
            }
        }
    }

    // Ends every stage at once. What the queues still held is dropped, each acquisition among it
    // recorded under `why` so the session's summary still adds up (received = used + discarded).
    void abort_all(const std::string& why) {
        {
            std::lock_guard<std::mutex> lock(abort_mutex);
            abort_reason = why;
        }
        for (auto& s : stages)
            for (const Queued& q : s->queue.abort())
                if (q.item && ctx.ledger)
                    if (const auto scan = acquisition_scan(*q.item)) ctx.ledger->discarded(why, *scan);
    }

    // An acquisition a gadget emitted after the abort (it was in the gadget's hands meanwhile).
    void dropped_at_abort(uint32_t scan) {
        std::string why;
        {
            std::lock_guard<std::mutex> lock(abort_mutex);
            why = abort_reason;
        }
        if (ctx.ledger) ctx.ledger->discarded(why, scan);
    }
    std::mutex abort_mutex;
    std::string abort_reason = "dropped when the chain was stopped";  // abort_all's `why`

    void join_all() {
        for (auto& s : stages)
            if (s->thread.joinable()) s->thread.join();
    }
};

ChainRunner::ChainRunner(const config::Chain& chain, size_t queue_capacity) : impl_(std::make_unique<Impl>()) {
    if (chain.gadget_size() == 0)
        throw ConfigError("chain '" + chain.name() + "' has no gadgets");
    for (const auto& g : chain.gadget())
        impl_->stages.push_back(std::make_unique<Impl::Stage>(make_gadget(g), gadget_display_name(g), queue_capacity));
    impl_->backend = chain.backend();
    impl_->cpu_fallback = chain.cpu_fallback();
}

ChainRunner::ChainRunner(std::vector<std::unique_ptr<Gadget>> gadgets, std::vector<std::string> names,
                         size_t queue_capacity)
    : impl_(std::make_unique<Impl>()) {
    if (gadgets.empty()) throw ConfigError("a chain needs at least one gadget");
    if (names.size() != gadgets.size())
        throw std::invalid_argument("ChainRunner: " + std::to_string(names.size()) + " names for " +
                                    std::to_string(gadgets.size()) + " gadgets");
    for (size_t i = 0; i < gadgets.size(); ++i)
        impl_->stages.push_back(std::make_unique<Impl::Stage>(std::move(gadgets[i]), names[i], queue_capacity));
}

ChainRunner::~ChainRunner() {
    if (impl_->queue_reporter) unregister_queue_reporter(impl_->queue_reporter);
    if (impl_->started && !impl_->closed) impl_->abort_all("dropped when the chain was stopped");
    impl_->join_all();
}

void ChainRunner::abort(const std::string& why) {
    if (!impl_->started || impl_->closed) {
        impl_->join_all();  // after close_and_wait: nothing is left to drop
        return;
    }
    impl_->closed = true;
    impl_->abort_all(why);
    impl_->join_all();
}

void ChainRunner::start(SessionContext ctx, ChainSink sink) {
    if (impl_->started) throw std::logic_error("ChainRunner::start called twice");
    impl_->ctx = std::move(ctx);
    if (impl_->ctx.backend) impl_->host_budget = impl_->ctx.backend->budgets().host;
    impl_->sink = std::move(sink);
    impl_->started = true;
    Impl* impl = impl_.get();
    impl_->queue_reporter = register_queue_reporter([impl](const std::function<void(const std::string&, size_t)>& f) {
        for (const auto& s : impl->stages) f(s->name, s->queue.size());
    });
    for (size_t i = 0; i < impl_->stages.size(); ++i)
        impl_->stages[i]->thread = std::thread([this, i] { impl_->run_stage(i); });
}

void ChainRunner::push(Message msg, BudgetCharge charge) {
    if (!impl_->started) throw std::logic_error("ChainRunner::push before start");
    if (impl_->closed) throw std::logic_error("ChainRunner::push after close");
    // After a failure the rest of the stream is read and dropped here, so the session can still
    // wait for the client's CLOSE without the chain doing useless work.
    if (impl_->any_failed) {
        if (const auto scan = acquisition_scan(msg)) impl_->ctx.ledger->discarded(kAfterFailure, *scan);
        return;
    }
    Impl::Stage& first = *impl_->stages.front();
    BudgetCharge held = impl_->charge_for(msg, first, charge);
    first.queue.push(Impl::Queued{Item(std::move(msg)), std::move(held)});
}

void ChainRunner::close_and_wait() {
    if (!impl_->started || impl_->closed) return;
    impl_->closed = true;
    impl_->stages.front()->queue.push(Impl::Queued{Item(), {}});
    impl_->join_all();
}

void ChainRunner::set_error_hook(ChainErrorHook hook) {
    if (impl_->started) throw std::logic_error("ChainRunner::set_error_hook after start");
    impl_->error_hook = std::move(hook);
}

bool ChainRunner::failed() const { return impl_->any_failed; }

std::vector<std::string> ChainRunner::errors() const {
    std::lock_guard<std::mutex> lock(impl_->error_mutex);
    return impl_->error_list;
}

std::vector<std::string> ChainRunner::gadget_names() const {
    std::vector<std::string> names;
    for (const auto& s : impl_->stages) names.push_back(s->name);
    return names;
}

uint64_t ChainRunner::working_set(const ISMRMRD::IsmrmrdHeader& header) const {
    uint64_t total = 0;
    for (const auto& s : impl_->stages) total = saturating_add(total, s->gadget->working_set(header));
    return total;
}

bool ChainRunner::uses_trajectories() const {
    for (const auto& s : impl_->stages)
        if (s->gadget->uses_trajectories()) return true;
    return false;
}

bool ChainRunner::cartesian_only() const {
    for (const auto& s : impl_->stages)
        if (s->gadget->cartesian_only()) return true;
    return false;
}

bool ChainRunner::splits_across_devices() const {
    for (const auto& s : impl_->stages)
        if (s->gadget->splits_across_devices()) return true;
    return false;
}

int ChainRunner::backend_choice() const { return impl_->backend; }

bool ChainRunner::cpu_fallback() const { return impl_->cpu_fallback; }

}  // namespace larmor
