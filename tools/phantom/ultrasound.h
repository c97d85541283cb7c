// larmor-phantom --ultrasound: the element RF signals of one plane-wave shot of a linear array
// insonifying point targets, written as an ISMRMRD dataset.
//
// Model (first-order scattering, no attenuation, no geometric spreading, omnidirectional elements):
//     s(x_e, t) = sum_p a_p pulse(t - (tx_p + sqrt((x_e - x_p)^2 + z_p^2) / c)),
//     tx_p = (x_p sin(theta) + z_p cos(theta)) / c,
// the transmit time of the plane wave (angle theta, t = 0 when the wavefront crosses x = z = 0) plus the
// echo's way back to element e. pulse(t) = exp(-t^2 / (2 sigma^2)) cos(2 pi f0 t), sigma from the
// -6 dB fractional bandwidth, so the envelope peaks exactly at the arrival time.
//
// ISMRMRD mapping (the gadget gadgets/ultrasound_planewave.cpp reads the same):
//  * one acquisition per element: acquisition e (idx.kspace_encode_step_1 = e) holds element e's
//    signal, one channel, number_of_samples = time samples (sample n at t = n / fs,
//    sample_time_us = 1e6 / fs), real RF as complex samples with imaginary part 0;
//  * element e at x_e = (e - (elements - 1) / 2) pitch (the array centred on x = 0);
//  * encodedSpace/reconSpace matrix = (samples, elements, 1), field of view = (depth c samples / (2 fs),
//    aperture elements pitch, pitch) in mm; trajectory "other";
//  * userParameters (double): larmor.us.pitch_mm, larmor.us.sampling_hz, larmor.us.sound_speed_m_s,
//    larmor.us.center_frequency_hz, larmor.us.angle_deg; (string) larmor.us.targets =
//    "x_mm,z_mm,amplitude;..." (exact, %.17g) for tests;
//  * flags: FIRST_IN_SLICE on element 0, LAST_IN_SLICE (and LAST_IN_MEASUREMENT) on the last.
#pragma once

#include <complex>
#include <cstddef>
#include <string>
#include <vector>

#include <ismrmrd/ismrmrd.h>

namespace larmor::phantom {

struct PointTarget {
  double x_mm = 0.0, z_mm = 0.0, amplitude = 1.0;
};

struct UltrasoundSpec {
  int elements = 128;
  double pitch_mm = 0.3;
  double sound_speed_m_s = 1540.0;
  double center_frequency_hz = 5e6;
  double fractional_bandwidth = 0.6;  // -6 dB bandwidth / f0 of the Gaussian pulse
  double sampling_hz = 20e6;
  double depth_mm = 40.0;             // record length: samples = ceil(2 depth / c fs)
  double angle_deg = 0.0;             // transmit steering angle
  std::vector<PointTarget> targets;   // empty: the default set (default_targets())
};

// A few targets across the field: three depths on the axis, two off axis.
std::vector<PointTarget> default_targets();

// Throws std::invalid_argument naming the first inconsistent field.
void validate(const UltrasoundSpec& spec);
int ultrasound_samples(const UltrasoundSpec& spec);
double wavelength_mm(const UltrasoundSpec& spec);
double element_x_mm(const UltrasoundSpec& spec, int element);

// RF [samples, elements], time fastest (element e's signal at e * samples).
std::vector<float> simulate_plane_wave(const UltrasoundSpec& spec);

// The ISMRMRD XML header and the acquisition header of element e (without data).
std::string ultrasound_header_xml(const UltrasoundSpec& spec);
ISMRMRD::AcquisitionHeader ultrasound_acquisition_header(const UltrasoundSpec& spec, int element);

// "x,z,a;x,z,a" and back.
std::string format_targets(const std::vector<PointTarget>& targets);
std::vector<PointTarget> parse_targets(const std::string& text);

// Writes /dataset (header + one acquisition per element) to path, replacing an existing file.
void write_ultrasound_dataset(const UltrasoundSpec& spec, const std::string& path);
std::string describe(const UltrasoundSpec& spec);

}  // namespace larmor::phantom
