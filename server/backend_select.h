#pragma once
// Which backend a session gets: the server's --backend policy combined with the chain's `backend`
// field. Either saying CPU means CPU; a chain that insists on CUDA on a machine without a usable
// device fails the session with a message naming the chain, instead of silently running on the CPU.
#include <memory>
#include <stdexcept>
#include <string>

#include "core/backend.h"
#include "server/server_options.h"

namespace larmor::server {

class BackendError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Parses "auto", "cpu" or "cuda"; throws std::invalid_argument naming the value otherwise.
BackendPolicy parse_backend_policy(const std::string& text);

// True for CUDA, false for CPU. `chain_choice` is larmor.config.BackendChoice (0 auto, 1 cpu, 2 cuda).
// Throws BackendError when CUDA is required (by the chain or the server) but `cuda_usable` is false.
bool choose_cuda(BackendPolicy server, int chain_choice, const std::string& chain_name, bool cuda_usable);

// Builds the chosen backend: CUDA on `device` (from the session's DeviceLease), else the CPU.
// Throws BackendError naming the device and its error.
std::shared_ptr<Backend> make_session_backend(bool use_cuda, int device, MemoryBudgets budgets);

}  // namespace larmor::server
