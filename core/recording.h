#pragma once
// Backend::record: a fixed sequence of queued work (one iteration of a solver) run many times.
// Why: an iteration of CG-SENSE is five to ten small launches, and on a GPU the host's few
// microseconds per launch, not the device, bound it (bench/RESULTS.md, 2026-12-02). The CUDA backend
// captures the sequence once into a CUDA graph and then queues the whole iteration with one call;
// the CPU backend, and a body the GPU cannot capture, simply run the body again.
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace larmor {

class Recording {
public:
    virtual ~Recording() = default;
    // Queues the recorded work once more: the same effect as calling the body.
    virtual void replay() = 0;
    // True when replay() launches a captured graph; false when it calls the body.
    virtual bool captured() const = 0;
    // Why the body was not captured ("" when it was): e.g. it allocates, waits or reads back.
    virtual const std::string& why_not_captured() const = 0;
};

// Thrown by a backend operation that cannot be part of a recording (an allocation, a wait, a read
// back to the host) when it is called while its thread records; record() catches it and falls back
// to calling the body.
class RecordingRefused : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The fallback: replay() calls `body`.
std::unique_ptr<Recording> direct_recording(std::function<void()> body, std::string why_not);

}  // namespace larmor
