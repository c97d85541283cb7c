#include "gadgets/sense/espirit_settings.h"

#include <cstdio>

#include "gadgets/chain_config.h"

namespace larmor {
namespace {

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

}  // namespace

coils::EspiritSettings espirit_settings(const config::EspiritSettings& s, const std::string& gadget,
                                        const std::string& field) {
    coils::EspiritSettings e;
    const std::string at = gadget + ": " + field + ".";
    if (s.kernel() != 0) {
        if (s.kernel() < 2 || s.kernel() > 16) throw ConfigError(at + "kernel " + std::to_string(s.kernel()) + " is outside 2..16");
        e.kernel = s.kernel();
    }
    if (s.calibration() != 0) {
        if (s.calibration() <= e.kernel || s.calibration() > 256)
            throw ConfigError(at + "calibration " + std::to_string(s.calibration()) + " is outside " +
                              std::to_string(e.kernel + 1) + "..256 (it must exceed the kernel, " +
                              std::to_string(e.kernel) + ")");
        e.calibration = size_t(s.calibration());
    }
    if (s.threshold() != 0.f) {
        if (!(s.threshold() > 0.f && s.threshold() < 1.f))
            throw ConfigError(at + "threshold " + number(s.threshold()) + " is outside (0, 1)");
        e.threshold = s.threshold();
    }
    if (s.has_crop()) {
        if (!(s.crop() >= 0.f && s.crop() < 1.f)) throw ConfigError(at + "crop " + number(s.crop()) + " is outside [0, 1)");
        e.crop = s.crop();
    }
    if (s.iterations() != 0) {
        if (s.iterations() < 1 || s.iterations() > 1000)
            throw ConfigError(at + "iterations " + std::to_string(s.iterations()) + " is outside 1..1000");
        e.iterations = s.iterations();
    }
    if (s.sets() != 0) {
        if (s.sets() < 1 || s.sets() > 2) throw ConfigError(at + "sets " + std::to_string(s.sets()) + " is not 1 or 2");
        e.sets = s.sets();
    }
    coils::check(e);
    return e;
}

std::string describe(const coils::EspiritSettings& s) {
    return "ESPIRiT (kernel " + std::to_string(s.kernel) + ", calibration " + std::to_string(s.calibration) +
           ", threshold " + number(s.threshold) + ", crop " + number(s.crop) +
           (s.sets == 2 ? ", 2 sets" : "") + ")";
}

}  // namespace larmor
