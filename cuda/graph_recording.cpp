#include "cuda/graph_recording.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "cuda/cuda_check.h"

namespace larmor::cuda {
namespace {

class GraphRecording final : public Recording {
public:
    GraphRecording(std::shared_ptr<DeviceContext> ctx, cudaGraphExec_t exec, size_t nodes)
        : ctx_(std::move(ctx)), exec_(exec), nodes_(nodes) {}
    ~GraphRecording() override {
        // An executable graph still in flight is freed once its launches complete.
        DeviceGuard g(ctx_->device());
        if (cudaGraphExecDestroy(exec_) != cudaSuccess) cudaGetLastError();
    }
    GraphRecording(const GraphRecording&) = delete;
    GraphRecording& operator=(const GraphRecording&) = delete;

    void replay() override {
        DeviceGuard g(ctx_->device());
        LARMOR_CUDA_CHECK(cudaGraphLaunch(exec_, ctx_->stream()),
                          "replaying a recording of " + std::to_string(nodes_) + " operations on device " +
                              std::to_string(ctx_->device()));
    }
    bool captured() const override { return true; }
    const std::string& why_not_captured() const override { return none_; }

private:
    std::shared_ptr<DeviceContext> ctx_;
    cudaGraphExec_t exec_;
    size_t nodes_;
    std::string none_;
};

// Owns a graph until the end of the scope.
struct GraphHolder {
    cudaGraph_t g = nullptr;
    ~GraphHolder() {
        if (g && cudaGraphDestroy(g) != cudaSuccess) cudaGetLastError();
    }
};

}  // namespace

std::unique_ptr<Recording> record_graph(const std::shared_ptr<DeviceContext>& ctx, std::function<void()> body) {
    if (!body) throw std::invalid_argument("record: empty body");
    DeviceGuard guard(ctx->device());
    ctx->begin_recording();
    std::string why;
    try {
        body();
    } catch (const std::exception& e) {
        why = e.what();
    } catch (...) {
        why = "the body threw a non-standard exception";
    }
    GraphHolder graph{ctx->end_recording()};
    if (why.empty() && !graph.g) why = "the CUDA stream capture failed";
    size_t nodes = 0;
    cudaGraphExec_t exec = nullptr;
    if (why.empty()) {
        if (cudaGraphGetNodes(graph.g, nullptr, &nodes) != cudaSuccess) cudaGetLastError();
        const cudaError_t e = cudaGraphInstantiate(&exec, graph.g, 0);
        if (e != cudaSuccess) {
            cudaGetLastError();
            why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(e);
        }
    }
    if (!why.empty()) return direct_recording(std::move(body), std::move(why));
    try {
        return std::make_unique<GraphRecording>(ctx, exec, nodes);
    } catch (...) {
        cudaGraphExecDestroy(exec);
        throw;
    }
}

}  // namespace larmor::cuda
