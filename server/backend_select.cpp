#include "server/backend_select.h"

#include "chain.pb.h"

namespace larmor::server {

const char* to_string(BackendPolicy p) {
    switch (p) {
        case BackendPolicy::Cpu: return "cpu";
        case BackendPolicy::Cuda: return "cuda";
        case BackendPolicy::Auto: break;
    }
    return "auto";
}

BackendPolicy parse_backend_policy(const std::string& text) {
    if (text == "auto") return BackendPolicy::Auto;
    if (text == "cpu") return BackendPolicy::Cpu;
    if (text == "cuda") return BackendPolicy::Cuda;
    throw std::invalid_argument("unknown backend '" + text + "' (expected auto, cpu or cuda)");
}

bool choose_cuda(BackendPolicy server, int chain_choice, const std::string& chain_name, bool cuda_usable) {
    if (server == BackendPolicy::Cpu || chain_choice == config::BACKEND_CPU) return false;
    if (chain_choice == config::BACKEND_CUDA && !cuda_usable)
        throw BackendError("chain '" + chain_name + "' requires backend cuda (BACKEND_CUDA) but this server has " +
                           "no usable CUDA device");
    if (server == BackendPolicy::Cuda && !cuda_usable)
        throw BackendError("server runs with --backend cuda but no CUDA device is usable");
    if (chain_choice == config::BACKEND_CUDA || server == BackendPolicy::Cuda) return true;
    return cuda_usable;  // both auto
}

std::shared_ptr<Backend> make_session_backend(bool use_cuda, int device, MemoryBudgets budgets) {
    try {
        // One CPU backend per session uses all cores: concurrent sessions share them through the
        // OS scheduler, which is what a Gadgetron user expects from one server process.
        return use_cuda ? make_cuda_backend(device, std::move(budgets)) : make_cpu_backend(0, std::move(budgets));
    } catch (const std::exception& e) {
        throw BackendError(use_cuda ? "cannot create the cuda backend on device " + std::to_string(device) + ": " +
                                          e.what()
                                    : std::string("cannot create the cpu backend: ") + e.what());
    }
}

}  // namespace larmor::server
