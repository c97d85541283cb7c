#pragma once
// The chains a server offers: every file of its config directory, read and validated at start-up
// and again on SIGHUP, so that sessions always get a chain that was valid when it was loaded. An
// edit in progress (a half-written file, a typo) never reaches a session: on reload a file that no
// longer validates keeps its previous version, and the log names the file and the error, the way
// an operator expects a reload of nginx or a DICOM node to behave. New files are added, removed
// ones disappear.
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "chain.pb.h"

namespace larmor::server {

class ChainCatalog {
public:
    struct Report {
        std::vector<std::string> loaded;    // valid now, under these names
        std::vector<std::string> problems;  // "<name>: <error>" (and whether the previous version is kept)
        std::vector<std::string> removed;   // gone from the directory
    };

    // Loads `dir` (problems are in last_report(); an absent directory offers no chains).
    explicit ChainCatalog(std::string dir);

    // Re-reads the directory; thread-safe against concurrent get().
    Report reload();
    const Report& last_report() const { return report_; }

    // The chain a CONFIG_FILE `name` asks for ("cartesian", "cartesian.pbtxt", "default.xml").
    // Throws ConfigError naming the name, as load_chain_file does, listing the chains offered.
    config::Chain get(const std::string& name) const;
    std::vector<std::string> names() const;
    const std::string& dir() const { return dir_; }

private:
    const std::string dir_;
    mutable std::mutex m_;
    std::map<std::string, config::Chain> chains_;
    Report report_;
};

}  // namespace larmor::server
