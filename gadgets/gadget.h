#pragma once
// A gadget is one stage of a chain. The chain runner (gadgets/chain.h) gives each gadget its own
// thread and a bounded input queue; the gadget itself is single-threaded code that receives typed
// messages and emits messages downstream. Gadgets stay thin: numerical work goes through the
// session's Backend (core/), never through kernels launched here.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ismrmrd/xml.h>

#include "core/backend.h"
#include "gadgets/acquisition_ledger.h"
#include "gadgets/message.h"

namespace larmor {

class NoiseDependencyStore;  // gadgets/noise_dependency_store.h
class PrecomputeCache;       // gadgets/precompute_cache.h

// What every gadget of a session shares, fixed when the ISMRMRD header arrives.
struct SessionContext {
    ISMRMRD::IsmrmrdHeader header;  // parsed ISMRMRD XML header
    std::string header_xml;         // the same header as received
    std::shared_ptr<Backend> backend;
    std::string session_id;         // for log lines
    std::string chain_name;         // the chain's name as the client asked for it (image provenance)
    // Where noise covariances outlive their session (measurementDependency); null: none kept.
    std::shared_ptr<const NoiseDependencyStore> dependencies;
    // Where gadgets record what became of each acquisition they consume (acquisition_ledger.h).
    std::shared_ptr<AcquisitionLedger> ledger = std::make_shared<AcquisitionLedger>();
    // The server's store of trajectory set-up shared by sessions (precompute_cache.h); null: the
    // process's default (tests, tools).
    std::shared_ptr<PrecomputeCache> precompute;
    // Backends on the session's other CUDA devices (--devices), for a chain with a gadget that splits
    // one reconstruction across devices (Gadget::splits_across_devices); each charges its own device's
    // budget. Empty: `backend` alone (CPU sessions, one device, or chains that do not split).
    std::vector<std::shared_ptr<Backend>> peers;
};

// Where a gadget sends its output. Blocks when the next stage's queue is full (backpressure).
class Emitter {
public:
    virtual ~Emitter() = default;
    virtual void emit(Message msg) = 0;
};

class Gadget {
public:
    virtual ~Gadget() = default;

    // Called once on the gadget's thread before the first message, after the header arrived.
    // Throwing here fails the session with the message.
    virtual void start(const SessionContext& ctx) { (void)ctx; }

    // Handle one message. The default passes it on unchanged; gadgets pass on what they do not handle.
    // Gadgets normally derive from TypedGadget (gadgets/typed_gadget.h), which implements this by
    // the types they take. (Defined in gadget.cpp: inlined into callers, GCC 12 warns about the
    // variant's move.)
    virtual void process(Message msg, Emitter& out);

    // Called once after the last message (client CLOSE): flush what is buffered.
    virtual void finish(Emitter& out) { (void)out; }

    // Bytes of session-backend arrays this gadget will hold at once for a session with this header
    // (its largest buffers and workspaces). The server sums it over the chain when the header
    // arrives and admits the session only if that fits its memory budget, before anything big is
    // allocated (server/session.cpp). An estimate, not a bound: allocations are charged to the budget
    // as they happen, so a stream that sends more than its header declared is still stopped.
    virtual uint64_t working_set(const ISMRMRD::IsmrmrdHeader& header) const {
        (void)header;
        return 0;
    }

    // Whether this gadget reads acquisitions' trajectories (non-Cartesian gridding does): the
    // session counts trajectories sent to a chain where none does, and says so in its summary.
    virtual bool uses_trajectories() const { return false; }
    // Whether this gadget places readouts on a Cartesian grid by their encode-step counters: a
    // header whose trajectory is radial or spiral is then refused, not reconstructed as garbage.
    virtual bool cartesian_only() const { return false; }
    // Whether this gadget can split one reconstruction across the CUDA devices of --devices (3D
    // l1-SPIRiT by slabs): the session then gives it SessionContext::peers.
    virtual bool splits_across_devices() const { return false; }

protected:
    // Emits msg, moved from. Out of line for the same reason as process().
    static void forward(Message& msg, Emitter& out);
};

}  // namespace larmor
