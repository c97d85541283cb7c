// Fuzz target: a chain in Larmor's Protobuf text format as a session takes a CONFIG_SCRIPT
// (Session::on_config): parse_chain (schema check, validation), then the ChainRunner that builds
// every gadget from its parameters (no threads start before the header). A bad chain may only be
// refused with ConfigError, which names the offending value; anything else is a finding. XML goes to
// the gadgetron_xml target.
#include <cstddef>
#include <cstdint>
#include <string>

#include <spdlog/spdlog.h>

#include "chain.pb.h"
#include "gadgets/chain.h"
#include "gadgets/chain_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const bool quiet = [] {
        spdlog::set_level(spdlog::level::off);  // gadgets log their set-up; millions of runs need no log
        return true;
    }();
    (void)quiet;
    const std::string text(reinterpret_cast<const char*>(data), size);
    const size_t first = text.find_first_not_of(" \t\r\n\f\v");
    if (first != std::string::npos && text[first] == '<') return 0;
    try {
        const larmor::config::Chain chain = larmor::parse_chain(text, "CONFIG_SCRIPT");
        larmor::ChainRunner runner(chain, 64);
        (void)runner.gadget_names();
    } catch (const larmor::ConfigError&) {
    }
    return 0;
}
