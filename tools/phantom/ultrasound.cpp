// Point-target simulation of one plane-wave shot and its ISMRMRD dataset (see ultrasound.h).
#include "tools/phantom/ultrasound.h"
#include "core/constants.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include <ismrmrd/dataset.h>
#include <ismrmrd/version.h>
#include <ismrmrd/xml.h>

namespace larmor::phantom {
namespace {

void require_ultrasound(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("ultrasound phantom: " + what);
}

std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::vector<PointTarget> default_targets() {
  return {{0.0, 10.0, 1.0}, {0.0, 20.0, 1.0}, {0.0, 30.0, 1.0}, {-8.0, 15.0, 1.0}, {6.0, 25.0, 1.0}};
}

void validate(const UltrasoundSpec& s) {
  require_ultrasound(s.elements >= 2 && s.elements <= 4096, "elements " + std::to_string(s.elements) + " is outside 2..4096");
  auto positive = [](double v, const char* what) {
    require_ultrasound(std::isfinite(v) && v > 0.0, std::string(what) + " " + std::to_string(v) + " must be > 0");
  };
  positive(s.pitch_mm, "pitch_mm");
  positive(s.sound_speed_m_s, "sound_speed_m_s");
  positive(s.center_frequency_hz, "center_frequency_hz");
  positive(s.fractional_bandwidth, "fractional_bandwidth");
  positive(s.sampling_hz, "sampling_hz");
  positive(s.depth_mm, "depth_mm");
  require_ultrasound(std::isfinite(s.angle_deg) && std::abs(s.angle_deg) < 45.0,
          "angle_deg " + std::to_string(s.angle_deg) + " is outside (-45, 45)");
  require_ultrasound(s.sampling_hz > 2.0 * s.center_frequency_hz * (1.0 + s.fractional_bandwidth),
          "sampling_hz " + std::to_string(s.sampling_hz) + " is below twice the pulse's upper band edge");
  const int samples = ultrasound_samples(s);
  require_ultrasound(samples >= 2 && samples <= 65535, "depth_mm " + std::to_string(s.depth_mm) + " gives " +
                                                std::to_string(samples) + " samples, outside 2..65535");
  for (size_t i = 0; i < s.targets.size(); ++i) {
    const PointTarget& t = s.targets[i];
    require_ultrasound(std::isfinite(t.x_mm) && std::isfinite(t.z_mm) && std::isfinite(t.amplitude) && t.z_mm > 0.0,
            "target " + std::to_string(i) + " at (" + std::to_string(t.x_mm) + ", " + std::to_string(t.z_mm) +
                ") mm: z must be > 0 and all values finite");
  }
}

int ultrasound_samples(const UltrasoundSpec& s) {
  return static_cast<int>(std::ceil(2.0 * s.depth_mm * 1e-3 / s.sound_speed_m_s * s.sampling_hz));
}

double wavelength_mm(const UltrasoundSpec& s) { return s.sound_speed_m_s / s.center_frequency_hz * 1e3; }

double element_x_mm(const UltrasoundSpec& s, int element) {
  return (element - 0.5 * (s.elements - 1)) * s.pitch_mm;
}

std::vector<float> simulate_plane_wave(const UltrasoundSpec& spec) {
  validate(spec);
  const std::vector<PointTarget> targets = spec.targets.empty() ? default_targets() : spec.targets;
  const int nt = ultrasound_samples(spec), nx = spec.elements;
  const double c = spec.sound_speed_m_s, f0 = spec.center_frequency_hz, dt = 1.0 / spec.sampling_hz;
  // Gaussian envelope: amplitude spectrum exp(-(f - f0)^2 / (2 sigma_f^2)) falls to 1/2 at f0 +- B/2.
  const double sigma_f = spec.fractional_bandwidth * f0 / (2.0 * std::sqrt(2.0 * std::log(2.0)));
  const double sigma_t = 1.0 / (2.0 * kPi * sigma_f);
  const double reach = 6.0 * sigma_t;  // the envelope is below 1.6e-8 beyond
  const double sin_a = std::sin(spec.angle_deg * kPi / 180.0), cos_a = std::cos(spec.angle_deg * kPi / 180.0);
  std::vector<double> acc(static_cast<size_t>(nt) * nx, 0.0);
#pragma omp parallel for schedule(static)
  for (int e = 0; e < nx; ++e) {
    const double xe = element_x_mm(spec, e) * 1e-3;
    for (const PointTarget& p : targets) {
      const double xp = p.x_mm * 1e-3, zp = p.z_mm * 1e-3;
      const double tau = (xp * sin_a + zp * cos_a + std::hypot(xe - xp, zp)) / c;
      const int n0 = std::max(0, static_cast<int>(std::floor((tau - reach) / dt)));
      const int n1 = std::min(nt - 1, static_cast<int>(std::ceil((tau + reach) / dt)));
      for (int n = n0; n <= n1; ++n) {
        const double t = n * dt - tau;
        acc[static_cast<size_t>(e) * nt + n] +=
            p.amplitude * std::exp(-t * t / (2.0 * sigma_t * sigma_t)) * std::cos(2.0 * kPi * f0 * t);
      }
    }
  }
  return std::vector<float>(acc.begin(), acc.end());
}

std::string format_targets(const std::vector<PointTarget>& targets) {
  std::string s;
  for (const PointTarget& t : targets)
    s += (s.empty() ? "" : ";") + exact(t.x_mm) + "," + exact(t.z_mm) + "," + exact(t.amplitude);
  return s;
}

std::vector<PointTarget> parse_targets(const std::string& text) {
  std::vector<PointTarget> out;
  std::stringstream all(text);
  std::string item;
  while (std::getline(all, item, ';')) {
    if (item.empty()) continue;
    PointTarget t;
    char c1 = 0, c2 = 0;
    std::stringstream one(item);
    one >> t.x_mm >> c1 >> t.z_mm;
    if (!one || c1 != ',') throw std::invalid_argument("ultrasound phantom: target '" + item + "' is not x,z[,amplitude]");
    if (one >> c2) {
      if (c2 != ',' || !(one >> t.amplitude))
        throw std::invalid_argument("ultrasound phantom: target '" + item + "' is not x,z[,amplitude]");
    }
    out.push_back(t);
  }
  return out;
}

std::string ultrasound_header_xml(const UltrasoundSpec& spec) {
  validate(spec);
  const int nt = ultrasound_samples(spec);
  ISMRMRD::IsmrmrdHeader h;
  h.version = ISMRMRD_XMLHDR_VERSION;
  ISMRMRD::MeasurementInformation meas;
  meas.measurementID = "LARMOR_ULTRASOUND";
  meas.patientPosition = "HFS";
  meas.protocolName = std::string("larmor-phantom plane wave");
  meas.seriesDescription = describe(spec);
  h.measurementInformation = meas;
  ISMRMRD::AcquisitionSystemInformation sys;
  sys.systemVendor = std::string("Larmor");
  sys.systemModel = std::string("larmor-phantom (point-target ultrasound)");
  sys.receiverChannels = 1;
  h.acquisitionSystemInformation = sys;
  // Required by the schema; an ultrasound scan has no Larmor frequency: the pulse's centre frequency.
  h.experimentalConditions.H1resonanceFrequency_Hz = static_cast<long>(spec.center_frequency_hz);

  ISMRMRD::Encoding enc;
  const auto nt16 = static_cast<unsigned short>(nt), nx16 = static_cast<unsigned short>(spec.elements);
  const float depth_mm = static_cast<float>(spec.sound_speed_m_s * nt / (2.0 * spec.sampling_hz) * 1e3);
  const float aperture_mm = static_cast<float>(spec.elements * spec.pitch_mm);
  enc.encodedSpace.matrixSize = ISMRMRD::MatrixSize(nt16, nx16, 1);
  enc.encodedSpace.fieldOfView_mm = {depth_mm, aperture_mm, static_cast<float>(spec.pitch_mm)};
  enc.reconSpace = enc.encodedSpace;
  enc.encodingLimits.kspace_encoding_step_1 = ISMRMRD::Limit(0, static_cast<unsigned short>(spec.elements - 1), 0);
  enc.encodingLimits.kspace_encoding_step_2 = ISMRMRD::Limit(0, 0, 0);
  enc.encodingLimits.slice = ISMRMRD::Limit(0, 0, 0);
  enc.encodingLimits.repetition = ISMRMRD::Limit(0, 0, 0);
  enc.trajectory = ISMRMRD::TrajectoryType::OTHER;
  h.encoding.push_back(enc);

  ISMRMRD::UserParameters user;
  user.userParameterDouble.push_back({"larmor.us.pitch_mm", spec.pitch_mm});
  user.userParameterDouble.push_back({"larmor.us.sampling_hz", spec.sampling_hz});
  user.userParameterDouble.push_back({"larmor.us.sound_speed_m_s", spec.sound_speed_m_s});
  user.userParameterDouble.push_back({"larmor.us.center_frequency_hz", spec.center_frequency_hz});
  user.userParameterDouble.push_back({"larmor.us.angle_deg", spec.angle_deg});
  user.userParameterString.push_back(
      {"larmor.us.targets", format_targets(spec.targets.empty() ? default_targets() : spec.targets)});
  h.userParameters = user;
  std::ostringstream xml;
  ISMRMRD::serialize(h, xml);
  return xml.str();
}

ISMRMRD::AcquisitionHeader ultrasound_acquisition_header(const UltrasoundSpec& spec, int element) {
  ISMRMRD::AcquisitionHeader head;
  head.number_of_samples = static_cast<std::uint16_t>(ultrasound_samples(spec));
  head.active_channels = 1;
  head.available_channels = 1;
  head.setChannelActive(0);
  head.sample_time_us = static_cast<float>(1e6 / spec.sampling_hz);
  head.measurement_uid = 1;
  head.scan_counter = static_cast<std::uint32_t>(element + 1);
  head.idx.kspace_encode_step_1 = static_cast<std::uint16_t>(element);
  head.center_sample = 0;
  head.read_dir[2] = 1.0f;   // samples run in depth (z),
  head.phase_dir[0] = 1.0f;  // elements along the array (x),
  head.slice_dir[1] = 1.0f;  // the elevation direction
  head.position[0] = static_cast<float>(element_x_mm(spec, element));
  if (element == 0) head.setFlag(ISMRMRD::ISMRMRD_ACQ_FIRST_IN_SLICE);
  if (element == spec.elements - 1) {
    head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE);
    head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_MEASUREMENT);
  }
  return head;
}

void write_ultrasound_dataset(const UltrasoundSpec& spec, const std::string& path) {
  const std::vector<float> rf = simulate_plane_wave(spec);
  const std::string xml = ultrasound_header_xml(spec);
  const int nt = ultrasound_samples(spec);
  std::remove(path.c_str());  // ISMRMRD::Dataset appends to an existing file
  ISMRMRD::Dataset dset(path.c_str(), "dataset", true);
  dset.writeHeader(xml);
  ISMRMRD::Acquisition acq(static_cast<std::uint16_t>(nt), 1);
  for (int e = 0; e < spec.elements; ++e) {
    acq.setHead(ultrasound_acquisition_header(spec, e));  // same sizes: the data buffer is kept
    std::complex<float>* d = acq.data_begin();
    for (int n = 0; n < nt; ++n) d[n] = std::complex<float>(rf[static_cast<size_t>(e) * nt + n], 0.0f);
    dset.appendAcquisition(acq);
  }
}

std::string describe(const UltrasoundSpec& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "plane wave %g deg, %d elements x %.3g mm, f0 %.3g MHz, fs %.3g MHz, c %.0f m/s, %d samples, %zu targets",
                s.angle_deg, s.elements, s.pitch_mm, s.center_frequency_hz * 1e-6, s.sampling_hz * 1e-6,
                s.sound_speed_m_s, ultrasound_samples(s), s.targets.empty() ? default_targets().size() : s.targets.size());
  return buf;
}

}  // namespace larmor::phantom
