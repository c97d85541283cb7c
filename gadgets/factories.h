#pragma once
// One factory per gadget type; gadgets/registry.cpp maps larmor.config.Gadget's oneof onto these.
#include <memory>

#include "chain.pb.h"
#include "gadgets/gadget.h"

namespace larmor {

std::unique_ptr<Gadget> make_pass_through(const config::PassThrough& cfg);
std::unique_ptr<Gadget> make_acquisition_counter(const config::AcquisitionCounter& cfg);
std::unique_ptr<Gadget> make_noise_adjust(const config::NoiseAdjust& cfg);
std::unique_ptr<Gadget> make_remove_ro_oversampling(const config::RemoveROOversampling& cfg);
std::unique_ptr<Gadget> make_accumulate_trigger(const config::AccumulateTrigger& cfg);
std::unique_ptr<Gadget> make_fft(const config::FFT& cfg);
std::unique_ptr<Gadget> make_coil_combine(const config::CoilCombine& cfg);
std::unique_ptr<Gadget> make_image_finish(const config::ImageFinish& cfg);
std::unique_ptr<Gadget> make_dicom_finish(const config::DicomFinish& cfg);
std::unique_ptr<Gadget> make_cg_sense(const config::CgSense& cfg);
std::unique_ptr<Gadget> make_pics_l1(const config::PicsL1& cfg);
std::unique_ptr<Gadget> make_spirit(const config::Spirit& cfg);
std::unique_ptr<Gadget> make_accumulate_readouts(const config::AccumulateReadouts& cfg);
std::unique_ptr<Gadget> make_gridding(const config::Gridding& cfg);
std::unique_ptr<Gadget> make_radial_fbp(const config::RadialFbp& cfg);
std::unique_ptr<Gadget> make_ultrasound_planewave(const config::UltrasoundPlaneWave& cfg);
std::unique_ptr<Gadget> make_toeplitz_cg(const config::ToeplitzCg& cfg);
std::unique_ptr<Gadget> make_grappa(const config::Grappa& cfg);

// Builds the gadget described by one chain entry. Throws ConfigError for an empty entry.
std::unique_ptr<Gadget> make_gadget(const config::Gadget& g);

}  // namespace larmor
