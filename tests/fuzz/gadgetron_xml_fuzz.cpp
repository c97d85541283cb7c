// Fuzz target: a Gadgetron XML chain as a session takes a CONFIG_SCRIPT that starts with '<'
// (Session::on_config): parse_chain translates it by classname (gadgets/gadgetron_xml) and validates
// it, then the ChainRunner builds every gadget. A bad chain may only be refused with ConfigError;
// anything else is a finding. As in the session, a chain naming NoiseSummaryGadget is first checked
// for Gadgetron's noise dependency pre-query (server/dependency_query), which is answered without
// building a chain.
#include <cstddef>
#include <cstdint>
#include <string>

#include <spdlog/spdlog.h>

#include "chain.pb.h"
#include "gadgets/chain.h"
#include "gadgets/chain_config.h"
#include "server/dependency_query.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const bool quiet = [] {
        spdlog::set_level(spdlog::level::off);  // gadgets log their set-up; millions of runs need no log
        return true;
    }();
    (void)quiet;
    const std::string text(reinterpret_cast<const char*>(data), size);
    const size_t first = text.find_first_not_of(" \t\r\n\f\v");
    if (first == std::string::npos || text[first] != '<') return 0;  // protobuf text: chain_config
    if (larmor::server::noise_dependency_query_id(text)) return 0;
    try {
        const larmor::config::Chain chain = larmor::parse_chain(text, "CONFIG_SCRIPT");
        larmor::ChainRunner runner(chain, 64);
        (void)runner.gadget_names();
    } catch (const larmor::ConfigError&) {
    }
    return 0;
}
