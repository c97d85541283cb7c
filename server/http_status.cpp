#include "server/http_status.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <sstream>
#include <utility>

#include "core/backend.h"
#include "core/cpu/fftw_plans.h"
#include "gadgets/chain_metrics.h"
#include "gadgets/precompute_cache.h"
#include "server/chain_catalog.h"
#include "server/device_pool.h"
#include "server/memory_admission.h"
#include "server/stats.h"

namespace larmor::server {
namespace {

// A label value in Prometheus' text format: backslash, double quote and newline escaped.
std::string prom_label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

// Counts and byte sizes exactly (a 17.7 GiB limit is not 1.77e+10), fractions to 9 digits.
std::string prom_number(double v) {
    char b[40];
    if (v == std::floor(v) && std::fabs(v) < 9e15)
        std::snprintf(b, sizeof b, "%.0f", v);
    else
        std::snprintf(b, sizeof b, "%.9g", v);
    return b;
}

class PrometheusText {
public:
    void family(const char* name, const char* type, const char* help) {
        s_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
    }
    void sample(const std::string& name, const std::string& labels, double v) {
        s_ << name;
        if (!labels.empty()) s_ << '{' << labels << '}';
        s_ << ' ' << prom_number(v) << '\n';
    }
    // A family of one unlabelled sample.
    void single(const char* name, const char* type, const char* help, double v) {
        family(name, type, help);
        sample(name, "", v);
    }
    std::string str() const { return s_.str(); }

private:
    std::ostringstream s_;
};

void prom_memory_samples(PrometheusText& t, const std::string& name, const std::string& labels, const MemoryBudget& b) {
    const std::string sep = labels.empty() ? "" : ",";
    t.sample(name, labels + sep + "state=\"limit\"", double(b.limit()));
    t.sample(name, labels + sep + "state=\"in_use\"", double(b.in_use()));
    t.sample(name, labels + sep + "state=\"peak\"", double(b.peak()));
}

std::string html_escaped(const std::string& v) {
    std::string out;
    for (char c : v) {
        switch (c) {
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '&':
                out += "&amp;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

std::string fixed_digits(double v, int digits) {
    char b[40];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    return b;
}

std::string mib_text(double bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f MiB", bytes / 1048576.0);
    return b;
}

std::string status_page_html(const StatusSources& src) {
    const ServerStats& st = src.query.stats;
    const std::string problems = readiness_problems(src);
    std::ostringstream p;
    p << "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"2\">"
         "<title>Larmor status</title><style>body{font:14px sans-serif;margin:2em;color:#222}"
         "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}"
         "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.ok{color:#080}.no{color:#b00}img.thumb{height:64px;image-rendering:pixelated;background:#000}</style>"
         "</head><body><h1>Larmor</h1><p>"
      << html_escaped(version_string()) << ", up " << fixed_digits(st.uptime_seconds(), 0) << " s. "
      << (problems.empty() ? "<b class=\"ok\">ready</b>" : "<b class=\"no\">not ready</b>: " + html_escaped(problems))
      << "</p><table><tr><th>sessions</th><th>now</th><th>total</th><th>failed</th><th>turned away</th>"
         "<th>refused for memory</th></tr><tr><td></td><td>"
      << st.sessions_active.load() << " of " << src.query.options.max_sessions << "</td><td>"
      << st.sessions_total.load() << "</td><td>" << st.sessions_failed.load() << "</td><td>"
      << st.sessions_rejected.load() << "</td><td>" << st.sessions_over_budget.load() << "</td></tr></table>"
      << "<table><tr><th>traffic</th><th>acquisitions</th><th>received</th><th>images sent</th></tr><tr><td></td><td>"
      << st.acquisitions.load() << "</td><td>" << mib_text(double(st.bytes_received.load())) << "</td><td>"
      << st.images_sent.load() << "</td></tr></table>";
    p << "<table><tr><th>memory</th><th>in use</th><th>peak</th><th>limit</th><th>sessions</th><th>free on "
         "device</th></tr>";
    if (src.query.memory) {
        const MemoryBudget& h = *src.query.memory->host();
        p << "<tr><td>host</td><td>" << mib_text(double(h.in_use())) << "</td><td>" << mib_text(double(h.peak()))
          << "</td><td>" << mib_text(double(h.limit())) << "</td><td></td><td></td></tr>";
    }
    if (src.query.devices)
        for (const DeviceLoad& d : src.query.devices->load()) {
            p << "<tr><td>GPU " << d.device << "</td>";
            const auto b = src.query.memory ? src.query.memory->device_budget(d.device) : nullptr;
            if (b)
                p << "<td>" << mib_text(double(b->in_use())) << "</td><td>" << mib_text(double(b->peak()))
                  << "</td><td>" << mib_text(double(b->limit())) << "</td>";
            else
                p << "<td></td><td></td><td></td>";
            p << "<td>" << d.sessions << "</td><td>" << mib_text(double(cuda_device_free_memory(d.device)))
              << "</td></tr>";
        }
    p << "</table>";
    if (src.sessions) {
        const std::vector<Session::Live> live = src.sessions();
        p << "<table><tr><th>session</th><th>client</th><th>chain</th><th>running</th><th>acquisitions</th>"
             "<th>images</th><th>latest image</th><th>last message</th></tr>";
        for (const Session::Live& l : live)
            p << "<tr><td>" << html_escaped(l.id) << "</td><td>" << html_escaped(l.peer) << "</td><td>"
              << html_escaped(l.chain.empty() ? "(waiting for its config)" : l.chain) << "</td><td>"
              << fixed_digits(l.seconds, 1) << " s</td><td>" << l.acquisitions << "</td><td>" << l.images
              << "</td><td>"
              << (l.thumbnail.empty() ? std::string("-")
                                      : "<img class=\"thumb\" alt=\"latest image of " + html_escaped(l.id) +
                                            "\" src=\"" + l.thumbnail + "\">")
              << "</td><td style=\"text-align:left\">" << html_escaped(l.last_text) << "</td></tr>";
        if (live.empty()) p << "<tr><td colspan=\"8\">no session running</td></tr>";
        p << "</table>";
    }
    p << "<table><tr><th>gadget</th><th>calls</th><th>mean time</th><th>queued now</th></tr>";
    for (const GadgetFigures& g : gadget_figures())
        p << "<tr><td>" << html_escaped(g.name) << "</td><td>" << g.count << "</td><td>"
          << (g.count ? fixed_digits(g.seconds / double(g.count) * 1e3, 3) + " ms" : std::string("-")) << "</td><td>"
          << g.queued << "</td></tr>";
    if (src.errors) {
        const auto errors = src.errors->newest_first();
        p << "</table><table><tr><th>recent errors</th><th>session</th><th>error</th></tr>";
        for (const RecentErrors::Entry& e : errors) {
            const std::time_t t = std::chrono::system_clock::to_time_t(e.when);
            std::tm utc{};
            gmtime_r(&t, &utc);
            char when[32];
            std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
            p << "<tr><td>" << when << "</td><td>" << html_escaped(e.session) << "</td><td style=\"text-align:left\">"
              << html_escaped(e.text) << "</td></tr>";
        }
        if (errors.empty()) p << "<tr><td colspan=\"3\">none</td></tr>";
    }
    p << "</table><p><a href=\"/metrics\">metrics</a> &middot; <a href=\"/status\">status JSON</a></p></body></html>\n";
    return p.str();
}

}  // namespace

std::string readiness_problems(const StatusSources& src) {
    std::string why;
    if (src.shutting_down && src.shutting_down()) why += "shutting down\n";
    if (!src.query.chains || src.query.chains->names().empty())
        why += "no chains loaded from '" + (src.query.chains ? src.query.chains->dir() : src.query.options.config_dir) +
               "'\n";
    if (src.query.stats.sessions_active.load() >= src.query.options.max_sessions)
        why += "at the session limit (--max-sessions " + std::to_string(src.query.options.max_sessions) + ")\n";
    if (src.query.options.backend == BackendPolicy::Cuda && (!src.query.devices || src.query.devices->empty()))
        why += "--backend cuda and no usable CUDA device\n";
    return why;
}

std::string prometheus_metrics(const StatusSources& src) {
    const ServerStats& st = src.query.stats;
    PrometheusText t;
    t.family("larmor_info", "gauge", "Version of the server (the value is 1).");
    t.sample("larmor_info", "version=\"" + prom_label(LARMOR_VERSION) + "\"", 1);
    t.single("larmor_uptime_seconds", "gauge", "Seconds since the server started.", st.uptime_seconds());
    t.single("larmor_ready", "gauge", "1 when a new session would be taken (/readyz).",
             readiness_problems(src).empty() ? 1 : 0);
    t.single("larmor_sessions_active", "gauge", "Sessions running now.", double(st.sessions_active.load()));
    t.single("larmor_sessions_limit", "gauge", "--max-sessions.", double(src.query.options.max_sessions));
    t.single("larmor_sessions_total", "counter", "Sessions started.", double(st.sessions_total.load()));
    t.single("larmor_connections_pending", "gauge", "Connections without a chain config yet (no session slot).",
             double(st.connections_pending.load()));
    t.single("larmor_connections_pending_limit", "gauge", "--max-pending-connections.",
             double(src.query.options.max_pending));
    t.single("larmor_connections_silent_closed_total", "counter",
             "Connections closed at the handshake deadline without having sent a byte.",
             double(st.pending_timed_out.load()));
    t.single("larmor_sessions_failed_total", "counter", "Sessions that ended with at least one error.",
             double(st.sessions_failed.load()));
    t.family("larmor_connections_refused_total", "counter", "Connections not served, by reason.");
    t.sample("larmor_connections_refused_total", "reason=\"session_limit\"", double(st.sessions_rejected.load()));
    t.sample("larmor_connections_refused_total", "reason=\"memory\"", double(st.sessions_over_budget.load()));
    t.sample("larmor_connections_refused_total", "reason=\"not_allowed\"", double(st.connections_refused.load()));
    t.sample("larmor_connections_refused_total", "reason=\"tls\"", double(st.tls_handshakes_failed.load()));
    t.sample("larmor_connections_refused_total", "reason=\"per_address\"", double(st.per_address_refused.load()));
    t.sample("larmor_connections_refused_total", "reason=\"pending_limit\"", double(st.pending_refused.load()));
    t.single("larmor_received_bytes_total", "counter", "Bytes of messages received from clients.",
             double(st.bytes_received.load()));
    t.single("larmor_acquisitions_total", "counter", "Acquisitions received.", double(st.acquisitions.load()));
    t.single("larmor_waveforms_total", "counter", "Waveforms received.", double(st.waveforms.load()));
    t.single("larmor_images_sent_total", "counter", "Images sent to clients.", double(st.images_sent.load()));
    t.single("larmor_error_texts_total", "counter", "Error messages sent to clients.", double(st.errors.load()));
    if (src.query.memory) {
        t.family("larmor_host_memory_bytes", "gauge", "The sessions' host memory budget (--memory-limit).");
        prom_memory_samples(t, "larmor_host_memory_bytes", "", *src.query.memory->host());
    }
    if (src.query.devices && !src.query.devices->empty()) {
        const auto load = src.query.devices->load();
        t.family("larmor_device_sessions", "gauge", "Sessions leased to each CUDA device.");
        for (const DeviceLoad& d : load)
            t.sample("larmor_device_sessions", "device=\"" + std::to_string(d.device) + "\"", double(d.sessions));
        if (src.query.memory) {
            t.family("larmor_device_memory_budget_bytes", "gauge",
                     "Each CUDA device's budget (--device-memory-limit).");
            for (const DeviceLoad& d : load)
                if (const auto b = src.query.memory->device_budget(d.device))
                    prom_memory_samples(t, "larmor_device_memory_budget_bytes",
                                        "device=\"" + std::to_string(d.device) + "\"", *b);
        }
        t.family("larmor_device_memory_bytes", "gauge", "Each CUDA device's memory as the driver reports it.");
        for (const DeviceLoad& d : load) {
            const std::string dev = "device=\"" + std::to_string(d.device) + "\"";
            t.sample("larmor_device_memory_bytes", dev + ",state=\"total\"", double(cuda_device_memory(d.device)));
            t.sample("larmor_device_memory_bytes", dev + ",state=\"free\"", double(cuda_device_free_memory(d.device)));
        }
    }
    const std::vector<GadgetFigures> gadgets = gadget_figures();
    t.family("larmor_gadget_seconds", "histogram", "Time of each gadget's process() call, per gadget.");
    for (const GadgetFigures& g : gadgets) {
        const std::string name = "gadget=\"" + prom_label(g.name) + "\"";
        uint64_t cumulative = 0;
        for (size_t b = 0; b < kGadgetTimeBounds.size(); ++b) {
            cumulative += g.buckets[b];
            t.sample("larmor_gadget_seconds_bucket", name + ",le=\"" + prom_number(kGadgetTimeBounds[b]) + "\"",
                     double(cumulative));
        }
        t.sample("larmor_gadget_seconds_bucket", name + ",le=\"+Inf\"", double(g.count));
        t.sample("larmor_gadget_seconds_sum", name, g.seconds);
        t.sample("larmor_gadget_seconds_count", name, double(g.count));
    }
    t.family("larmor_gadget_queued_messages", "gauge", "Messages waiting in front of each gadget, over all sessions.");
    for (const GadgetFigures& g : gadgets)
        t.sample("larmor_gadget_queued_messages", "gadget=\"" + prom_label(g.name) + "\"", double(g.queued));
    if (src.cache) {
        const PrecomputeCache::Stats c = src.cache->stats();
        t.family("larmor_precompute_cache_lookups_total", "counter",
                 "Precompute cache lookups by outcome (memory or disk hit, computed on a miss).");
        t.sample("larmor_precompute_cache_lookups_total", "outcome=\"memory_hit\"", double(c.memory_hits));
        t.sample("larmor_precompute_cache_lookups_total", "outcome=\"disk_hit\"", double(c.disk_hits));
        t.sample("larmor_precompute_cache_lookups_total", "outcome=\"computed\"", double(c.computed));
        t.family("larmor_precompute_cache_evicted_total", "counter", "Precompute cache entries evicted.");
        t.sample("larmor_precompute_cache_evicted_total", "", double(c.evicted));
        t.family("larmor_precompute_cache_bytes", "gauge", "Bytes the precompute cache holds.");
        t.sample("larmor_precompute_cache_bytes", "where=\"host\"", double(c.bytes));
        t.sample("larmor_precompute_cache_bytes", "where=\"devices\"", double(c.device_bytes));
        t.family("larmor_precompute_cache_entries", "gauge", "Entries in the precompute cache.");
        t.sample("larmor_precompute_cache_entries", "", double(c.entries));
    }
    // Transform plans are made once per shape and process and shared by sessions (core/plan_registry.h).
    const PlanRegistryStats fftw = fftw_plan_stats(), cufft = cuda_fft_plan_stats();
    t.family("larmor_fft_plan_lookups_total", "counter",
             "FFT plan lookups of sessions by library and outcome (planned: made for the first time in this process).");
    for (const auto& [lib, st] : {std::pair<const char*, const PlanRegistryStats&>{"fftw", fftw}, {"cufft", cufft}}) {
        t.sample("larmor_fft_plan_lookups_total", std::string("library=\"") + lib + "\",outcome=\"planned\"", double(st.created));
        t.sample("larmor_fft_plan_lookups_total", std::string("library=\"") + lib + "\",outcome=\"reused\"", double(st.reused));
    }
    t.family("larmor_fft_plans", "gauge", "FFT plans the process keeps, by library.");
    t.sample("larmor_fft_plans", "library=\"fftw\"", double(fftw.entries));
    t.sample("larmor_fft_plans", "library=\"cufft\"", double(cufft.entries));
    t.family("larmor_idle_pinned_host_bytes", "gauge",
             "Page-locked host memory kept between CUDA sessions (counted in the host memory in use).");
    t.sample("larmor_idle_pinned_host_bytes", "", double(idle_cuda_host_memory()));
    return t.str();
}

HttpReply http_status_reply(const std::string& target, const StatusSources& src) {
    const std::string path = target.substr(0, target.find('?'));
    if (path == "/healthz") return {200, "text/plain; charset=utf-8", "ok\n"};
    if (path == "/readyz") {
        const std::string why = readiness_problems(src);
        return why.empty() ? HttpReply{200, "text/plain; charset=utf-8", "ready\n"}
                           : HttpReply{503, "text/plain; charset=utf-8", "not ready: " + why};
    }
    if (path == "/metrics") return {200, "text/plain; version=0.0.4; charset=utf-8", prometheus_metrics(src)};
    if (path == "/status") return {200, "application/json", answer_query("larmor::status", src.query) + "\n"};
    if (path == "/" || path == "/index.html") return {200, "text/html; charset=utf-8", status_page_html(src)};
    return {404, "text/plain; charset=utf-8",
            "no page '" + path.substr(0, 200) + "'; see / /healthz /readyz /metrics /status\n"};
}

}  // namespace larmor::server
