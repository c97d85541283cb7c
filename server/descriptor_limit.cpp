#include "server/descriptor_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

namespace larmor::server {

void raise_descriptor_limit(const ServerOptions& o) {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
    if (lim.rlim_cur < lim.rlim_max) {
        rlimit raised = lim;
        raised.rlim_cur = lim.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
    }
    // Sessions: socket + writer; pending connections: one each; as many again for refusals lingering,
    // and a margin for files (chains, the dependency store, logs).
    const unsigned long long need = 2ull * o.max_sessions + 2ull * o.max_pending + 256;
    if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < need)
        spdlog::warn("the open-file limit is {} (ulimit -n), but --max-sessions {} and --max-pending-connections {} may "
                     "need {}: beyond it new connections wait until others end; raise the limit or lower the flags",
                     static_cast<unsigned long long>(lim.rlim_cur), o.max_sessions, o.max_pending, need);
}

}  // namespace larmor::server
