#include "gadgets/iterative/settings.h"

#include <cmath>
#include <cstdio>

#include "gadgets/chain_config.h"

namespace larmor {
namespace {

// %g, not std::to_string: a refused tolerance of 1e-7 must not read "0.000000".
std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

[[noreturn]] void refuse(const std::string& gadget, const std::string& field, const char* knob,
                         const std::string& value, const std::string& why) {
    throw ConfigError(gadget + ": " + field + "." + knob + " " + value + " " + why);
}

}  // namespace

SolverKnobs solver_knobs(const config::SolverSettings& s, const std::string& gadget, const std::string& field) {
    SolverKnobs k;
    if (s.iterations() != 0) k.iterations = s.iterations();
    if (s.has_tolerance()) k.tolerance = s.tolerance();
    if (s.has_lambda()) k.lambda = s.lambda();
    if (s.progress_interval() != 0) k.progress_interval = s.progress_interval();
    k.deadline_ms = s.deadline_ms();

    if (k.iterations < 1 || k.iterations > 10000)
        refuse(gadget, field, "iterations", std::to_string(s.iterations()), "is outside 1..10000 (0 = 30)");
    // Infinite values are refused as well: an infinite tolerance stops CG before its first iteration,
    // an infinite lambda turns the solution into NaN; either would only fail later, on the first buffer.
    if (!(std::isfinite(k.tolerance) && k.tolerance >= 0.f))
        refuse(gadget, field, "tolerance", number(k.tolerance), "is not a finite number >= 0 (0 = run all iterations)");
    if (!(std::isfinite(k.lambda) && k.lambda >= 0.f))
        refuse(gadget, field, "lambda", number(k.lambda), "is not a finite number >= 0");
    if (k.progress_interval < -1)
        refuse(gadget, field, "progress_interval", std::to_string(s.progress_interval()),
               "is invalid (use 0 for the default, -1 for none)");
    // An infinite deadline is no deadline: allowed. NaN compares false and would silently be none: refused.
    if (!(k.deadline_ms >= 0.f)) refuse(gadget, field, "deadline_ms", number(k.deadline_ms), "is not >= 0 (0 = none)");
    return k;
}

NufftOptions nufft_options(const config::NufftSettings& s, const std::string& gadget, const std::string& field) {
    // Checked as floats, as written: 1e-6f and 0.1f lie on the wrong side of the double bounds, so a
    // check in double would refuse a chain that asks for exactly the documented limit.
    if (s.tolerance() != 0.f && !(s.tolerance() >= 1e-6f && s.tolerance() <= 0.1f))
        refuse(gadget, field, "tolerance", number(s.tolerance()), "is outside 1e-6..0.1 (0 = 1e-3)");
    if (s.upsampling() != 0.f && !(s.upsampling() >= 1.25f && s.upsampling() <= 2.f))
        refuse(gadget, field, "upsampling", number(s.upsampling()), "is outside 1.25..2 (0 = 2)");
    // The defaults stay NufftOptions' own doubles (1e-3, not 1e-3f): the kernel width is derived from
    // the tolerance, and the image meta reports it.
    NufftOptions o;
    if (s.tolerance() != 0.f) o.tolerance = s.tolerance();
    if (s.upsampling() != 0.f) o.upsampling = s.upsampling();
    return o;
}

}  // namespace larmor
