#pragma once
// Answers to QUERY messages (Gadgetron's gadgetron::* keys plus larmor::status). Pure functions of
// the server's options and counters, so they are cheap to answer in any session state.
#include <string>
#include <vector>

#include "server/chain_catalog.h"
#include "server/device_pool.h"
#include "server/memory_admission.h"
#include "server/server_options.h"
#include "server/stats.h"

namespace larmor::server {

struct QueryContext {
    const ServerOptions& options;
    const ServerStats& stats;
    const DevicePool* devices = nullptr;  // null: no CUDA devices to report
    const ServerMemory* memory = nullptr;  // null: no budgets to report
    const ChainCatalog* chains = nullptr;  // null: list the config directory as it is now
};

// The keys answer_query knows, in a stable order (listed in the answer to an unknown key).
std::vector<std::string> known_query_keys();

// The RESPONSE text for `key`. Unknown keys get "unknown query key '<key>'; known keys: ...".
// Surrounding whitespace and trailing NULs of the key are ignored (some clients send them).
std::string answer_query(const std::string& key, const QueryContext& ctx);

// "Larmor <version> (Gadgetron protocol compatible)".
std::string version_string();

}  // namespace larmor::server
