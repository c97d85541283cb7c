#pragma once
// A tiny synchronous driver for gadget tests: gadgets run in order on the calling thread, each
// message going all the way down before push() returns, and whatever leaves the last gadget is
// collected. It mirrors what the chain runner guarantees a gadget (start before the first message,
// finish in order) without its threads and queues, so a failing test points at a gadget, not at
// the runner.
#include <memory>
#include <string>
#include <vector>

#include "gadgets/gadget.h"

namespace larmor::test {

// Session context from an ISMRMRD XML header (parsed with ISMRMRD::deserialize).
SessionContext make_session(const std::string& header_xml, std::shared_ptr<Backend> backend,
                            const std::string& session_id = "test");

class GadgetHarness {
public:
    explicit GadgetHarness(std::vector<std::unique_ptr<Gadget>> gadgets);
    ~GadgetHarness();
    GadgetHarness(const GadgetHarness&) = delete;
    GadgetHarness& operator=(const GadgetHarness&) = delete;

    // Starts every gadget in order with (a copy of) ctx.
    void start(const SessionContext& ctx);
    // Feeds one message to the first gadget.
    void push(Message msg);
    // finish() of every gadget in order, as at the end of a stream.
    void finish();

    std::vector<Message>& output() { return output_; }

    // The collected messages of one kind, moved out of output() (others stay).
    template <class T>
    std::vector<T> take() {
        std::vector<T> taken;
        std::vector<Message> rest;
        for (Message& m : output_) {
            if (auto* t = std::get_if<T>(&m))
                taken.push_back(std::move(*t));
            else
                rest.push_back(std::move(m));
        }
        output_ = std::move(rest);
        return taken;
    }

private:
    class Stage;
    void deliver(size_t index, Message msg);

    std::vector<std::unique_ptr<Gadget>> gadgets_;
    std::vector<std::unique_ptr<Stage>> stages_;  // stages_[i] emits into gadget i + 1
    SessionContext ctx_;
    std::vector<Message> output_;
};

// Convenience: builds the harness, starts it, pushes all messages, finishes, returns the output.
std::vector<Message> run_chain(std::vector<std::unique_ptr<Gadget>> gadgets, const SessionContext& ctx,
                               const std::vector<Message>& input);

// An ISMRMRD HDF5 dataset (/dataset/xml and /dataset/data) read into memory. read_dataset reads a
// private copy of the file, so tests running at once can read the same shared dataset and leave it as is.
struct Dataset {
    std::string header_xml;
    std::vector<Acquisition> acquisitions;
};
Dataset read_dataset(const std::string& path, const std::string& group = "dataset");

}  // namespace larmor::test
