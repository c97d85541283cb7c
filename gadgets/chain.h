#pragma once
// Runs a chain of gadgets for one session: one thread per gadget, a bounded queue in front of each,
// messages flowing in order. push() blocks when the first queue is full, so backpressure reaches the
// socket reader and a fast client cannot make the server buffer without limit.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/memory_budget.h"
#include "gadgets/gadget.h"

namespace larmor::config {
class Chain;
}

namespace larmor {

// Receives what leaves the last gadget (images and text go to the client; the rest is dropped).
using ChainSink = std::function<void(Message)>;
// Told of each gadget error ("[GadgetName] ERROR: what") as it happens, so the session can write it to
// its client at once instead of when the stream ends.
using ChainErrorHook = std::function<void(const std::string&)>;

class ChainRunner {
public:
    // Builds the gadgets of `chain` (validated already by load_chain*). Throws ConfigError.
    ChainRunner(const config::Chain& chain, size_t queue_capacity = 64);
    // Runs gadgets built by the caller (tests, embedding): names[i] labels gadgets[i] in errors.
    ChainRunner(std::vector<std::unique_ptr<Gadget>> gadgets, std::vector<std::string> names,
                size_t queue_capacity = 64);
    ~ChainRunner();  // stops and joins all threads
    ChainRunner(const ChainRunner&) = delete;
    ChainRunner& operator=(const ChainRunner&) = delete;

    // Starts the gadget threads. The sink is called from the last gadget's thread.
    void start(SessionContext ctx, ChainSink sink);

    // Feeds one message to the first gadget; blocks while its queue is full. After a gadget failed,
    // messages are discarded (the session keeps reading until the client's CLOSE). `charge`: what the
    // message is charged to the session's budget already (as it was received); it travels with the
    // message through the queues while it covers it, and is otherwise charged where it is queued.
    void push(Message msg, BudgetCharge charge = {});

    // Signals the end of the stream and waits until every gadget has finished in order.
    void close_and_wait();

    // Stops the chain without draining it (the session ended before its client's CLOSE, or failed)
    // and joins its threads. Every acquisition still queued, or emitted by a gadget after the stop,
    // is recorded in the ledger as discarded for `why` ("dropped at shutdown"). Nothing after a
    // completed close_and_wait().
    void abort(const std::string& why);

    // Before start(): `hook` is called on the failing gadget's thread with each error, in the order
    // errors() lists them, under the lock that guards them: it must return soon and must not call
    // back into this ChainRunner.
    void set_error_hook(ChainErrorHook hook);

    // True once any gadget has thrown.
    bool failed() const;
    // "[GadgetName] ERROR: what" for each failure, in the order they happened.
    std::vector<std::string> errors() const;

    // Names of the gadgets, in order (for logs and tests).
    std::vector<std::string> gadget_names() const;

    // Sum of the gadgets' working_set() for a session with this header (admission; gadget.h).
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& header) const;

    // Whether any gadget uses trajectories / places readouts on a Cartesian grid (gadget.h).
    bool uses_trajectories() const;
    bool cartesian_only() const;
    // Whether any gadget splits its work across devices (gadget.h).
    bool splits_across_devices() const;

    // Backend the chain asks for (auto/cpu/cuda), from the chain config.
    int backend_choice() const;
    // Whether the chain may run on the CPU when its CUDA backend cannot be had (chain.proto).
    bool cpu_fallback() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace larmor
