// Maps each case of larmor.config.Gadget's oneof onto its factory. Adding a gadget = a message in
// proto/chain.proto, a factory in factories.h, and one case here.
#include "gadgets/chain_config.h"
#include "gadgets/factories.h"

namespace larmor {

std::unique_ptr<Gadget> make_gadget(const config::Gadget& g) {
    using G = config::Gadget;
    switch (g.kind_case()) {
    case G::kPassThrough: return make_pass_through(g.pass_through());
    case G::kAcquisitionCounter: return make_acquisition_counter(g.acquisition_counter());
    case G::kNoiseAdjust: return make_noise_adjust(g.noise_adjust());
    case G::kRemoveRoOversampling: return make_remove_ro_oversampling(g.remove_ro_oversampling());
    case G::kAccumulateTrigger: return make_accumulate_trigger(g.accumulate_trigger());
    case G::kFft: return make_fft(g.fft());
    case G::kCoilCombine: return make_coil_combine(g.coil_combine());
    case G::kImageFinish: return make_image_finish(g.image_finish());
    case G::kDicomFinish: return make_dicom_finish(g.dicom_finish());
    case G::kCgSense: return make_cg_sense(g.cg_sense());
    case G::kPicsL1: return make_pics_l1(g.pics_l1());
    case G::kSpirit: return make_spirit(g.spirit());
    case G::kAccumulateReadouts: return make_accumulate_readouts(g.accumulate_readouts());
    case G::kGridding: return make_gridding(g.gridding());
    case G::kRadialFbp: return make_radial_fbp(g.radial_fbp());
    case G::kUltrasoundPlanewave: return make_ultrasound_planewave(g.ultrasound_planewave());
    case G::kToeplitzCg: return make_toeplitz_cg(g.toeplitz_cg());
    case G::kGrappa: return make_grappa(g.grappa());
    case G::KIND_NOT_SET: break;
    }
    throw ConfigError("gadget entry" + (g.name().empty() ? std::string() : " '" + g.name() + "'") +
                      " names no gadget type; known types: " + [] {
                          std::string s;
                          for (const auto& t : known_gadget_types()) s += (s.empty() ? "" : ", ") + t;
                          return s;
                      }());
}

}  // namespace larmor
