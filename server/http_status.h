#pragma once
// What larmor-server's HTTP endpoint (server/http_endpoint.h, --http-port) answers, for the people and
// probes that watch a running server:
//   /healthz  200 "ok" while the process serves at all (liveness)
//   /readyz   200 when a new session would be taken: chains loaded, not shutting down, under
//             --max-sessions, a CUDA device where --backend cuda asks for one; 503 naming what is not
//   /metrics  Prometheus text format 0.0.4: sessions, traffic, memory budgets, GPU memory, per-gadget
//             processing-time histograms and queue depths, the precompute cache
//   /status   the JSON of QUERY larmor::status
//   /         a status page that refreshes itself (no external assets)
#include <functional>
#include <string>
#include <vector>

#include "server/http_endpoint.h"
#include "server/queries.h"
#include "server/session.h"
#include "server/stats.h"

namespace larmor {
class PrecomputeCache;
}

namespace larmor::server {

struct StatusSources {
    QueryContext query;
    const PrecomputeCache* cache = nullptr;  // null: none to report
    std::function<bool()> shutting_down;     // empty: never
    std::function<std::vector<Session::Live>()> sessions;  // the live sessions; empty: none shown
    const RecentErrors* errors = nullptr;    // null: none shown
};

HttpReply http_status_reply(const std::string& target, const StatusSources& sources);

// The /metrics body.
std::string prometheus_metrics(const StatusSources& sources);

// Empty when ready; otherwise why not, one reason per line.
std::string readiness_problems(const StatusSources& sources);

}  // namespace larmor::server
