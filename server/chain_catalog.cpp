#include "server/chain_catalog.h"

#include "gadgets/chain_config.h"

namespace larmor::server {
namespace {

std::string joined(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? "none" : s;
}

}  // namespace

ChainCatalog::ChainCatalog(std::string dir) : dir_(std::move(dir)) { reload(); }

ChainCatalog::Report ChainCatalog::reload() {
    // Read outside the lock: sessions keep getting the current chains while the disk is read.
    std::map<std::string, config::Chain> fresh;
    Report r;
    std::vector<std::string> failed;
    for (const std::string& name : list_chains(dir_)) {
        try {
            fresh.emplace(name, load_chain_file(dir_, name));
            r.loaded.push_back(name);
        } catch (const std::exception& e) {
            failed.push_back(name);
            r.problems.push_back(name + ": " + e.what());
        }
    }
    std::lock_guard<std::mutex> lock(m_);
    for (size_t i = 0; i < failed.size(); ++i) {
        const auto old = chains_.find(failed[i]);
        if (old != chains_.end()) {
            fresh.emplace(failed[i], old->second);
            r.problems[i] += " (the previous version stays in use)";
        } else {
            r.problems[i] += " (not offered)";
        }
    }
    for (const auto& [name, chain] : chains_)
        if (!fresh.count(name)) r.removed.push_back(name);
    chains_ = std::move(fresh);
    report_ = r;
    return r;
}

config::Chain ChainCatalog::get(const std::string& name) const {
    check_config_name(name);
    std::lock_guard<std::mutex> lock(m_);
    // The names load_chain_file accepts: "x" or "x.pbtxt" for x.pbtxt, the full name for x.xml.
    const std::string pbtxt = ".pbtxt";
    for (const std::string& key :
         {name, name.size() > pbtxt.size() && name.compare(name.size() - pbtxt.size(), pbtxt.size(), pbtxt) == 0
                    ? name.substr(0, name.size() - pbtxt.size())
                    : std::string()}) {
        if (key.empty()) continue;
        const auto it = chains_.find(key);
        if (it != chains_.end()) return it->second;
    }
    std::vector<std::string> offered;
    for (const auto& [n, c] : chains_) offered.push_back(n);
    throw ConfigError("unknown chain '" + name + "'; available chains: " + joined(offered));
}

std::vector<std::string> ChainCatalog::names() const {
    std::lock_guard<std::mutex> lock(m_);
    std::vector<std::string> out;
    for (const auto& [n, c] : chains_) out.push_back(n);
    return out;
}

}  // namespace larmor::server
