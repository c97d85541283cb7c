#include "server/dependency_query.h"

#include <sstream>

#include <ismrmrd/meta.h>
#include <pugixml.hpp>

namespace larmor::server {
namespace {

// The name gadgetron_ismrmrd_client gives the dependency: this prefix and the measurement id.
constexpr const char* kLegacyPrefix = "GadgetronNoiseCovarianceMatrix_";

bool is_noise_summary(const pugi::xml_node& gadget) {
    return std::string(gadget.child_value("classname")) == "NoiseSummaryGadget" ||
           std::string(gadget.attribute("class").value()) == "NoiseSummaryGadget";
}

// The noise_file property of a gadget, in either of Gadgetron's property spellings.
std::string noise_file_of(const pugi::xml_node& gadget) {
    for (const pugi::xml_node& p : gadget.children("property")) {
        if (std::string(p.child_value("name")) == "noise_file") return p.child_value("value");
        if (std::string(p.attribute("name").value()) == "noise_file") return p.attribute("value").value();
    }
    return {};
}

std::string meta_text(const ISMRMRD::MetaContainer& meta) {
    std::ostringstream out;
    ISMRMRD::serialize(meta, out);
    return out.str();
}

}  // namespace

std::optional<std::string> noise_dependency_query_id(const std::string& config_script) {
    if (config_script.find("NoiseSummaryGadget") == std::string::npos) return std::nullopt;
    pugi::xml_document doc;
    if (!doc.load_buffer(config_script.data(), config_script.size())) return std::nullopt;
    // Legacy <gadgetronStreamConfiguration><gadget> or v2 <configuration><stream><gadget>.
    for (const pugi::xpath_node& n : doc.select_nodes("//gadget")) {
        const pugi::xml_node g = n.node();
        if (!is_noise_summary(g)) continue;
        std::string id = noise_file_of(g);
        const size_t slash = id.find_last_of('/');
        if (slash != std::string::npos) id = id.substr(slash + 1);
        if (id.rfind(kLegacyPrefix, 0) == 0) id = id.substr(std::string(kLegacyPrefix).size());
        return id;
    }
    return std::nullopt;
}

DependencyAnswer answer_noise_dependency_query(const std::string& measurement_id, const NoiseDependencyStore* store) {
    DependencyAnswer a;
    ISMRMRD::MetaContainer meta;
    try {
        std::optional<NoiseCovariance> cov;
        if (!store) {
            a.detail = "this server keeps no dependency store";
        } else if (measurement_id.empty()) {
            a.detail = "the query names no measurement";
        } else if (!(cov = store->load(measurement_id))) {
            a.detail = "not in the dependency store " + store->directory();
        }
        if (cov) {
            const NoiseSigmas s = noise_sigmas(*cov);
            // Gadgetron's fields, in its order.
            meta.append("noise_dwell_time_us", static_cast<double>(cov->noise_dwell_time_us));
            meta.append("min_sigma", static_cast<double>(s.min));
            meta.append("max_sigma", static_cast<double>(s.max));
            meta.append("mean_sigma", static_cast<double>(s.mean));
            meta.append("channels", static_cast<long>(cov->channels));
            meta.append("status", "success");
            a.found = true;
            a.detail = std::to_string(cov->channels) + " channels, sigma " + std::to_string(s.min) + ".." +
                       std::to_string(s.max);
        }
    } catch (const std::exception& e) {
        a.detail = e.what();
    }
    if (!a.found) {
        meta = ISMRMRD::MetaContainer();
        meta.append("status", "failed");
    }
    a.meta_xml = meta_text(meta);
    return a;
}

}  // namespace larmor::server
