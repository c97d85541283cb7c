// ISMRMRD header and HDF5 dataset writer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>

#include <ismrmrd/dataset.h>
#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/meta.h>
#include <ismrmrd/version.h>
#include <ismrmrd/xml.h>

#include "core/trajectory/trajectory.h"
#include "tools/phantom/phantom.h"
#include "tools/phantom/random.h"

namespace larmor::phantom {
namespace {

// A plausible 3 T gradient-echo protocol; the numbers only need to be sensible, nothing depends on them
// beyond the dwell time (the noise scan uses the same one, so prewhitening needs no bandwidth correction).
constexpr double kTrMs = 5.0;
constexpr double kTeMs = 2.0;
constexpr double kBandwidthPerPixelHz = 500.0;
constexpr double kLarmor3T = 127'740'000.0;  // 42.577 MHz/T x 3 T
constexpr std::uint32_t kTicksPerTr = 2;     // acquisition_time_stamp counts 2.5 ms ticks (Siemens)

// Noise streams: one per readout, keyed by what the readout is, so the noise does not depend on the order
// or the number of threads that generate it.
constexpr std::uint64_t kNoiseScanTag = 0x6e7363616eULL;  // "nscan"
constexpr std::uint64_t kImagingTag = 0x696d616765ULL;    // "image"

ISMRMRD::Limit limit(int count, int centre) {
  return ISMRMRD::Limit(0, static_cast<unsigned short>(std::max(0, count - 1)), static_cast<unsigned short>(centre));
}

float sample_time_us(const PhantomSpec& s) {
  return static_cast<float>(1e6 / (kBandwidthPerPixelHz * s.nx * s.ro_oversampling));
}

std::uint32_t measurement_uid(const PhantomSpec& s) { return static_cast<std::uint32_t>(s.seed % 1000000u) + 1u; }

void check_reference_image(const PhantomSpec& s) {
  if (s.dims == 2 && s.slices > 1)
    throw std::invalid_argument("phantom: the reference image is one image, of a single 2D slice or a 3D volume, "
                                "not of " + std::to_string(s.slices) + " slices");
}

// Imaging readouts of a non-Cartesian spec: per repetition and slice, the trajectory (normalised units in
// the file, unless write_traj is off), the exact samples (parallel), noise per readout (its own stream),
// appended in order.
void write_noncartesian(const Phantom& ph, ISMRMRD::Dataset& dset, const ISMRMRD::AcquisitionHeader& base,
                        std::uint32_t& scan_counter, std::uint32_t& stamp, WriteResult& result) {
  const PhantomSpec& s = ph.spec();
  const int dims = trajectory_dimensions(s), nc = s.coils;
  const bool weights = s.write_traj && s.weights_in_traj != StreamWeights::none;  // a last traj component
  const int traj_dims = s.write_traj ? dims + (weights ? 1 : 0) : 0;
  const int n = trajectory_samples(s) * s.ro_oversampling, per_partition = trajectory_readouts(s);
  const int partitions = s.trajectory == Trajectory::stack_of_stars ? s.nz : 1;
  const larmor::Shape image = dims == 3 ? larmor::Shape{static_cast<size_t>(s.nx), static_cast<size_t>(s.ny),
                                                        static_cast<size_t>(s.nz)}
                                        : larmor::Shape{static_cast<size_t>(s.nx), static_cast<size_t>(s.ny)};
  const std::size_t line = static_cast<std::size_t>(n) * nc;
  ISMRMRD::Acquisition acq(static_cast<std::uint16_t>(n), static_cast<std::uint16_t>(nc),
                           static_cast<std::uint16_t>(traj_dims));
  ISMRMRD::AcquisitionHeader head = base;
  head.number_of_samples = static_cast<std::uint16_t>(n);
  head.trajectory_dimensions = static_cast<std::uint16_t>(traj_dims);
  // A spiral starts at the centre; a spoke crosses it at sample n/2.
  head.center_sample = static_cast<std::uint16_t>(s.trajectory == Trajectory::spiral ? 0 : n / 2);
  const bool repeats = s.trajectory == Trajectory::radial || s.trajectory == Trajectory::stack_of_stars ||
                       s.trajectory == Trajectory::spiral;
  larmor::RArray coords, normalised, density;
  for (int rep = 0; rep < s.repetitions; ++rep) {
    if (rep == 0 || !repeats) {
      coords = trajectory_coords(s, rep);
      if (s.write_traj) normalised = larmor::trajectory::cycles_to_normalised(coords, image);
      if (weights) density = stream_density_weights(s, coords);
    }
    for (int slice = 0; slice < s.slices; ++slice) {
      std::vector<std::complex<float>> data = sample_trajectory(ph, slice, coords);
      const int total = per_partition * partitions;
#pragma omp parallel for schedule(static)
      for (int r = 0; r < total; ++r)
        ph.add_noise(data.data() + static_cast<std::size_t>(r) * line, n,
                     detail::mix(detail::mix(detail::mix(detail::mix(kImagingTag, rep), slice), r / per_partition),
                                 r % per_partition));
      for (int r = 0; r < total; ++r) {
        const int e1 = r % per_partition, e2 = r / per_partition;
        head.clearAllFlags();
        if (e1 == 0) head.setFlag(ISMRMRD::ISMRMRD_ACQ_FIRST_IN_ENCODE_STEP1);
        if (e1 + 1 == per_partition) head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_ENCODE_STEP1);
        if (r == 0) {
          head.setFlag(ISMRMRD::ISMRMRD_ACQ_FIRST_IN_ENCODE_STEP2);
          head.setFlag(ISMRMRD::ISMRMRD_ACQ_FIRST_IN_SLICE);
          if (slice == 0) head.setFlag(ISMRMRD::ISMRMRD_ACQ_FIRST_IN_REPETITION);
        }
        if (r + 1 == total) {
          head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_ENCODE_STEP2);
          head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE);
          if (slice + 1 == s.slices) {
            head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_REPETITION);
            if (rep + 1 == s.repetitions) head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_MEASUREMENT);
          }
        }
        ISMRMRD::ISMRMRD_EncodingCounters idx{};
        idx.kspace_encode_step_1 = static_cast<std::uint16_t>(e1);
        idx.kspace_encode_step_2 = static_cast<std::uint16_t>(e2);
        idx.slice = static_cast<std::uint16_t>(slice);
        idx.repetition = static_cast<std::uint16_t>(rep);
        head.idx = idx;
        head.position[2] = static_cast<float>(ph.slice_position(slice));
        head.scan_counter = ++scan_counter;
        head.acquisition_time_stamp = stamp;
        stamp += kTicksPerTr;
        acq.setHead(head);  // same sizes: the buffers are kept
        std::copy(data.begin() + static_cast<std::ptrdiff_t>(r * line),
                  data.begin() + static_cast<std::ptrdiff_t>((r + 1) * line), acq.data_begin());
        if (s.write_traj) {
          const float* t = normalised.data() + static_cast<std::size_t>(r) * n * dims;
          if (weights)  // (k..., w) per sample
            for (int i = 0; i < n; ++i) {
              float* out = acq.traj_begin() + static_cast<std::size_t>(i) * traj_dims;
              std::copy_n(t + static_cast<std::size_t>(i) * dims, dims, out);
              out[dims] = density.data()[static_cast<std::size_t>(r) * n + i];
            }
          else
            std::copy(t, t + static_cast<std::size_t>(n) * dims, acq.traj_begin());
        }
        dset.appendAcquisition(acq);
        ++result.imaging_acquisitions;
      }
    }
  }
}

}  // namespace

ISMRMRD::IsmrmrdHeader make_header(const PhantomSpec& s) {
  validate(s);
  ISMRMRD::IsmrmrdHeader h;
  h.version = ISMRMRD_XMLHDR_VERSION;

  ISMRMRD::SubjectInformation subject;
  subject.patientName = std::string("Shepp-Logan phantom");
  subject.patientID = std::string("larmor-phantom");
  h.subjectInformation = subject;

  ISMRMRD::StudyInformation study;
  study.studyDescription = std::string("larmor-phantom analytic dataset");
  h.studyInformation = study;

  ISMRMRD::MeasurementInformation meas;
  meas.measurementID = "LARMOR_PHANTOM_" + std::to_string(s.seed);
  meas.patientPosition = "HFS";
  meas.protocolName = std::string("larmor-phantom");
  meas.seriesDescription = describe(s);
  h.measurementInformation = meas;

  ISMRMRD::AcquisitionSystemInformation sys;
  sys.systemVendor = std::string("Larmor");
  sys.systemModel = std::string("larmor-phantom (analytic)");
  sys.systemFieldStrength_T = 3.0f;
  // Siemens' value for its receivers (the real scan in shared/data carries it too); Gadgetron-style noise
  // adjustment reads it from here.
  sys.relativeReceiverNoiseBandwidth = 0.793f;
  sys.receiverChannels = static_cast<unsigned short>(s.coils);
  for (int c = 0; c < s.coils; ++c) {
    ISMRMRD::CoilLabel label;
    label.coilNumber = static_cast<unsigned short>(c);
    label.coilName = "Phantom:" + std::to_string(c);
    sys.coilLabel.push_back(label);
  }
  sys.institutionName = std::string("Larmor");
  h.acquisitionSystemInformation = sys;

  h.experimentalConditions.H1resonanceFrequency_Hz = static_cast<long>(kLarmor3T);

  const int nx_enc = s.nx * s.ro_oversampling;
  const int nz = s.dims == 3 ? s.nz : 1;
  ISMRMRD::Encoding enc;
  enc.encodedSpace.matrixSize = ISMRMRD::MatrixSize(static_cast<unsigned short>(nx_enc), static_cast<unsigned short>(s.ny),
                                                    static_cast<unsigned short>(nz));
  enc.encodedSpace.fieldOfView_mm = {static_cast<float>(s.fov_mm[0] * s.ro_oversampling), static_cast<float>(s.fov_mm[1]),
                                     static_cast<float>(s.fov_mm[2])};
  enc.reconSpace.matrixSize = ISMRMRD::MatrixSize(static_cast<unsigned short>(s.nx), static_cast<unsigned short>(s.ny),
                                                  static_cast<unsigned short>(nz));
  enc.reconSpace.fieldOfView_mm = {static_cast<float>(s.fov_mm[0]), static_cast<float>(s.fov_mm[1]),
                                   static_cast<float>(s.fov_mm[2])};
  enc.encodingLimits.kspace_encoding_step_1 = limit(s.ny, s.ny / 2);
  enc.encodingLimits.kspace_encoding_step_2 = limit(nz, nz / 2);
  enc.encodingLimits.average = limit(1, 0);
  enc.encodingLimits.slice = limit(s.slices, s.slices / 2);
  enc.encodingLimits.contrast = limit(1, 0);
  enc.encodingLimits.phase = limit(1, 0);
  enc.encodingLimits.repetition = limit(s.repetitions, 0);
  enc.encodingLimits.set = limit(1, 0);
  enc.encodingLimits.segment = limit(1, 0);
  enc.trajectory = ISMRMRD::TrajectoryType::CARTESIAN;
  if (s.trajectory != Trajectory::cartesian) {
    // Readout index (spoke / interleave) in e1, the partition of a stack of stars in e2.
    const int readouts = trajectory_readouts(s);
    enc.encodingLimits.kspace_encoding_step_1 = limit(readouts, 0);
    if (s.trajectory != Trajectory::stack_of_stars) enc.encodingLimits.kspace_encoding_step_2 = limit(1, 0);
    switch (s.trajectory) {
      case Trajectory::radial:
      case Trajectory::stack_of_stars: enc.trajectory = ISMRMRD::TrajectoryType::RADIAL; break;
      case Trajectory::golden_angle:
      case Trajectory::tiny_golden: enc.trajectory = ISMRMRD::TrajectoryType::GOLDENANGLE; break;
      case Trajectory::spiral: enc.trajectory = ISMRMRD::TrajectoryType::SPIRAL; break;
      default: enc.trajectory = ISMRMRD::TrajectoryType::OTHER; break;
    }
    ISMRMRD::TrajectoryDescription desc;
    desc.identifier = std::string("larmor.") + to_string(s.trajectory);
    desc.userParameterLong.push_back({"readouts", readouts});
    desc.userParameterLong.push_back({"samples", trajectory_samples(s) * s.ro_oversampling});
    desc.comment = std::string("recomputed by larmor-phantom from the larmor.trajectory.* user parameters");
    enc.trajectoryDescription = desc;
  }
  if (s.sampling != Sampling::full) {
    ISMRMRD::ParallelImaging pi;
    pi.accelerationFactor.kspace_encoding_step_1 = static_cast<unsigned short>(s.accel_y);
    pi.accelerationFactor.kspace_encoding_step_2 = static_cast<unsigned short>(s.dims == 3 ? s.accel_z : 1);
    pi.calibrationMode = std::string(s.acs_lines > 0 ? "embedded" : "other");
    enc.parallelImaging = pi;
  }
  h.encoding.push_back(enc);

  ISMRMRD::SequenceParameters seq;
  seq.TR = std::vector<float>{static_cast<float>(kTrMs)};
  seq.TE = std::vector<float>{static_cast<float>(kTeMs)};
  seq.flipAngle_deg = std::vector<float>{15.0f};
  seq.sequence_type = std::string("Flash");
  h.sequenceParameters = seq;

  // Reference values a test can check a reconstruction against without recomputing the phantom.
  ISMRMRD::UserParameters user;
  if (s.sampling != Sampling::full) user.userParameterLong.push_back({"EmbeddedRefLinesE1", s.acs_lines});
  if (s.sampling != Sampling::full && s.dims == 3)
    user.userParameterLong.push_back({"EmbeddedRefLinesE2", std::min(s.acs_lines, s.nz)});
  user.userParameterLong.push_back({"larmor.phantom.seed", static_cast<long>(s.seed)});
  user.userParameterString.push_back({"larmor.phantom.sampling", to_string(s.sampling)});
  user.userParameterString.push_back(
      {"larmor.phantom.object", s.dims == 2 && s.slices == 1 ? "modified Shepp-Logan 2D (Toft)"
                                                              : "modified Shepp-Logan 3D (Koay/Schabel)"});
  user.userParameterDouble.push_back({"larmor.phantom.snr", s.snr});
  if (s.trajectory != Trajectory::cartesian) {
    // Everything a server needs to recompute the trajectory (core/trajectory with these parameters).
    user.userParameterString.push_back({"larmor.trajectory.kind", to_string(s.trajectory)});
    user.userParameterString.push_back(
        {"larmor.trajectory.units", "normalised: traj = k / N per axis, k in cycles per FOV, range [-0.5, 0.5]"});
    // 0: the acquisitions carry no traj; the chain computes it from these parameters.
    user.userParameterLong.push_back({"larmor.trajectory.in_stream", s.write_traj ? 1 : 0});
    if (!s.write_traj) user.userParameterString.push_back({"larmor.trajectory.computed", computed_trajectory_pbtxt(s)});
    if (s.write_traj && s.weights_in_traj != StreamWeights::none)
      user.userParameterString.push_back(
          {"larmor.trajectory.weights", std::string(to_string(s.weights_in_traj)) +
                                            " density weights, each sample's last traj component, k-space area in "
                                            "cycles per FOV (accumulate_readouts trajectory_weights)"});
    user.userParameterLong.push_back({"larmor.trajectory.readouts", trajectory_readouts(s)});
    user.userParameterLong.push_back({"larmor.trajectory.samples", trajectory_samples(s)});
    user.userParameterLong.push_back({"larmor.trajectory.oversampling", s.ro_oversampling});
    user.userParameterLong.push_back({"larmor.trajectory.dimensions", trajectory_dimensions(s)});
    if (s.trajectory == Trajectory::stack_of_stars) {
      user.userParameterLong.push_back({"larmor.trajectory.partitions", s.nz});
      user.userParameterLong.push_back({"larmor.trajectory.rotate_partitions", 1});
    }
    if (s.trajectory == Trajectory::tiny_golden)
      user.userParameterLong.push_back({"larmor.trajectory.tiny_golden_n", s.tiny_golden_n});
    if (s.trajectory == Trajectory::golden_angle || s.trajectory == Trajectory::tiny_golden ||
        s.trajectory == Trajectory::radial3d)
      user.userParameterString.push_back({"larmor.trajectory.continuation", "first readout = repetition x readouts"});
    if (s.trajectory == Trajectory::spiral)
      user.userParameterDouble.push_back({"larmor.trajectory.spiral_density", s.spiral_density});
  }
  h.userParameters = user;
  return h;
}

ISMRMRD::Image<float> reference_image(const Phantom& ph) {
  const PhantomSpec& s = ph.spec();
  check_reference_image(s);
  const int nz = s.dims == 3 ? s.nz : 1;
  ISMRMRD::Image<float> img(static_cast<std::uint16_t>(s.nx), static_cast<std::uint16_t>(s.ny),
                            static_cast<std::uint16_t>(nz), 1);
  // Filled in a copy and installed with setHead(): references into the packed header are misaligned.
  ISMRMRD::ImageHeader head = img.getHead();
  head.measurement_uid = measurement_uid(s);
  for (int a = 0; a < 3; ++a) head.field_of_view[a] = static_cast<float>(s.fov_mm[a]);
  head.position[2] = static_cast<float>(ph.slice_position(0));
  head.read_dir[0] = 1.0f;  // the acquisitions' identity orientation
  head.phase_dir[1] = 1.0f;
  head.slice_dir[2] = 1.0f;
  head.image_type = ISMRMRD::ISMRMRD_IMTYPE_MAGNITUDE;
  head.image_index = 1;
  head.image_series_index = 0;
  img.setHead(head);

  ISMRMRD::MetaContainer meta;
  meta.set("LarmorRole", "AnatomicalReference");
  meta.set("ImageComment", "anatomical reference (larmor-phantom truth)");
  std::ostringstream xml;
  ISMRMRD::serialize(meta, xml);
  img.setAttributeString(xml.str());

  // Each pixel the object's mean over it (3^3 sub-samples), as a scan of the anatomy sees it: edges
  // have their partial-volume pixels, so they are as wide as in the images the reference guides.
  // Overlapping intensities cancel to about -1e-17 (1 - 0.8 - 0.2): a magnitude is never negative.
  const std::vector<double> object = ph.image(0, 3);
  std::transform(object.begin(), object.end(), img.getDataPtr(),
                 [](double v) { return static_cast<float>(std::max(0.0, v)); });
  return img;
}

WriteResult write_dataset(const PhantomSpec& spec, const std::string& path, const WriteOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.reference_image) check_reference_image(spec);
  const Phantom ph(spec);
  const PhantomSpec& s = ph.spec();
  const int nx_enc = ph.encoded_nx(), ny = s.ny, nc = s.coils;
  const std::size_t line = static_cast<std::size_t>(nx_enc) * nc;
  const auto pattern = ph.sampling();
  if (pattern.empty()) throw std::runtime_error("phantom: empty sampling pattern");

  // Reference values for checking a reconstruction, as strings: ISMRMRD prints userParameterDouble with
  // six decimals, which would round sigma and the grid scale away.
  ISMRMRD::IsmrmrdHeader header = make_header(s);
  auto exact = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  auto& strings = header.userParameters->userParameterString;
  strings.push_back({"larmor.phantom.signal_level", exact(ph.signal_level())});
  strings.push_back({"larmor.phantom.noise_sigma", exact(ph.noise_sigma())});
  strings.push_back({"larmor.phantom.kspace_scale", exact(ph.kspace_scale())});
  std::ostringstream xml;
  ISMRMRD::serialize(header, xml);

  // ISMRMRD::Dataset appends to an existing file; a generator must produce exactly this dataset.
  std::remove(path.c_str());
  ISMRMRD::Dataset dset(path.c_str(), "dataset", true);
  dset.writeHeader(xml.str());

  WriteResult result;
  result.signal_level = ph.signal_level();
  result.noise_sigma = ph.noise_sigma();

  ISMRMRD::Acquisition acq(static_cast<std::uint16_t>(nx_enc), static_cast<std::uint16_t>(nc));
  // The header is filled in a copy and installed with setHead() before each append. ISMRMRD 1.8 packs its
  // structs to 2 bytes, so the references Acquisition's accessors return (scan_counter(), read_dir(), ...)
  // are misaligned, and writing through them is undefined behaviour; member access on the struct is not.
  ISMRMRD::AcquisitionHeader head = acq.getHead();
  head.available_channels = static_cast<std::uint16_t>(nc);
  for (int c = 0; c < nc; ++c) head.setChannelActive(static_cast<std::uint16_t>(c));
  head.measurement_uid = measurement_uid(s);
  head.sample_time_us = sample_time_us(s);
  head.read_dir[0] = 1.0f;   // identity orientation: readout along x,
  head.phase_dir[1] = 1.0f;  // phase encoding along y,
  head.slice_dir[2] = 1.0f;  // slice / partition along z
  std::uint32_t scan_counter = 0, stamp = 1000;

  if (s.noise_scan) {
    // Noise readouts come first, as on a scanner, with the imaging dwell time and the same coil covariance.
    // Generated in parallel blocks (one stream per readout), appended in order.
    constexpr int kBlock = 64;
    std::vector<std::complex<float>> block(kBlock * line);
    for (int b0 = 0; b0 < s.noise_samples; b0 += kBlock) {
      const int nb = std::min(kBlock, s.noise_samples - b0);
      std::fill(block.begin(), block.end(), std::complex<float>(0.0f));
#pragma omp parallel for schedule(static)
      for (int i = 0; i < nb; ++i)
        ph.add_noise(block.data() + static_cast<std::size_t>(i) * line, nx_enc,
                     detail::mix(kNoiseScanTag, static_cast<std::uint64_t>(b0 + i)));
      for (int i = 0; i < nb; ++i) {
        head.clearAllFlags();
        head.setFlag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT);
        head.idx = ISMRMRD::ISMRMRD_EncodingCounters{};
        head.center_sample = 0;
        head.scan_counter = ++scan_counter;
        head.acquisition_time_stamp = stamp;
        stamp += kTicksPerTr;
        acq.setHead(head);  // same sizes: the data buffer is kept
        std::copy(block.begin() + static_cast<std::ptrdiff_t>(i * line),
                  block.begin() + static_cast<std::ptrdiff_t>((i + 1) * line), acq.data_begin());
        dset.appendAcquisition(acq);
        ++result.noise_acquisitions;
      }
    }
  }
  // After the acquisitions: ISMRMRD keeps images in their own variable, so the order in the file is free.
  auto finish = [&] {
    if (options.reference_image) {
      dset.appendImage(kReferenceImageVariable, reference_image(ph));
      ++result.reference_images;
    }
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
  };
  if (s.trajectory != Trajectory::cartesian) {
    write_noncartesian(ph, dset, head, scan_counter, stamp, result);
    return finish();
  }
  head.center_sample = static_cast<std::uint16_t>(nx_enc / 2);

  // Range of pattern entries per e2, for the FIRST/LAST_IN_ENCODE_STEP1 flags of each partition.
  const int nz = ph.encoded_nz();
  std::vector<std::size_t> first(nz, pattern.size()), last(nz, pattern.size());
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const int e2 = pattern[i].e2;
    if (first[e2] == pattern.size()) first[e2] = i;
    last[e2] = i;
  }

  // Noiseless lines are the same in every repetition: keep them when there are several and they fit.
  const std::size_t cache_bytes = pattern.size() * line * sizeof(std::complex<float>) * s.slices;
  const bool cache = s.repetitions > 1 && cache_bytes <= (std::size_t(1) << 30);
  std::vector<std::vector<std::complex<float>>> cached(cache ? s.slices : 0);

  // One readout's noise stream, keyed by what the readout is.
  auto noise_stream = [&](int rep, int slice, const PhaseEncode& p) {
    return detail::mix(detail::mix(detail::mix(detail::mix(kImagingTag, rep), slice), p.e2), p.e1);
  };
  // Appends pattern entry i of (rep, slice); data holds its noisy samples, layout [coil][sample].
  auto append = [&](int rep, int slice, std::size_t i, const std::complex<float>* data) {
    const PhaseEncode& p = pattern[i];
    head.clearAllFlags();
    const bool first_in_slice = i == 0, last_in_slice = i + 1 == pattern.size();
    if (i == first[p.e2]) head.setFlag(ISMRMRD::ISMRMRD_ACQ_FIRST_IN_ENCODE_STEP1);
    if (i == last[p.e2]) head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_ENCODE_STEP1);
    if (first_in_slice) {
      head.setFlag(ISMRMRD::ISMRMRD_ACQ_FIRST_IN_ENCODE_STEP2);
      head.setFlag(ISMRMRD::ISMRMRD_ACQ_FIRST_IN_SLICE);
      if (slice == 0) head.setFlag(ISMRMRD::ISMRMRD_ACQ_FIRST_IN_REPETITION);
    }
    if (last_in_slice) {
      head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_ENCODE_STEP2);
      head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE);
      if (slice + 1 == s.slices) {
        head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_REPETITION);
        if (rep + 1 == s.repetitions) head.setFlag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_MEASUREMENT);
      }
    }
    // Embedded ACS: lines only there for calibration carry 20; lines that are also part of the imaging
    // pattern carry 21, so a GRAPPA chain uses them for both and a CS chain keeps them (Gadgetron semantics).
    if (p.calibration)
      head.setFlag(p.imaging ? ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING
                             : ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION);
    ISMRMRD::ISMRMRD_EncodingCounters idx{};
    idx.kspace_encode_step_1 = static_cast<std::uint16_t>(p.e1);
    idx.kspace_encode_step_2 = static_cast<std::uint16_t>(p.e2);
    idx.slice = static_cast<std::uint16_t>(slice);
    idx.repetition = static_cast<std::uint16_t>(rep);
    head.idx = idx;
    head.position[2] = static_cast<float>(ph.slice_position(slice));
    head.scan_counter = ++scan_counter;
    head.acquisition_time_stamp = stamp;
    stamp += kTicksPerTr;
    acq.setHead(head);  // same sizes: the data buffer is kept
    std::copy(data, data + line, acq.data_begin());
    dset.appendAcquisition(acq);
    ++result.imaging_acquisitions;
  };
  // Entries [i0, i1) of (rep, slice): noiseless lines from clean (contiguous), noise added in parallel
  // (each line has its own stream), then appended in order.
  std::vector<std::complex<float>> noisy;
  auto emit = [&](int rep, int slice, std::size_t i0, std::size_t i1, const std::complex<float>* clean) {
    noisy.assign(clean, clean + (i1 - i0) * line);
#pragma omp parallel for schedule(static)
    for (long long i = static_cast<long long>(i0); i < static_cast<long long>(i1); ++i)
      ph.add_noise(noisy.data() + (i - i0) * line, nx_enc, noise_stream(rep, slice, pattern[i]));
    for (std::size_t i = i0; i < i1; ++i) append(rep, slice, i, noisy.data() + (i - i0) * line);
  };

  std::vector<std::complex<float>> clean;
  for (int rep = 0; rep < s.repetitions; ++rep)
    for (int slice = 0; slice < s.slices; ++slice) {
      if (cache && !cached[slice].empty()) {
        emit(rep, slice, 0, pattern.size(), cached[slice].data());
        continue;
      }
      if (cache) cached[slice].resize(pattern.size() * line);
      ph.generate_planes(slice, [&](int e2, const cdouble* plane) {
        if (first[e2] == pattern.size()) return;
        const std::size_t i0 = first[e2], i1 = last[e2] + 1;
        clean.resize((i1 - i0) * line);
        for (std::size_t i = i0; i < i1; ++i)
          for (int c = 0; c < nc; ++c) {
            const cdouble* src = plane + (static_cast<std::size_t>(c) * ny + pattern[i].e1) * nx_enc;
            std::complex<float>* dst = clean.data() + (i - i0) * line + static_cast<std::size_t>(c) * nx_enc;
            for (int x = 0; x < nx_enc; ++x) dst[x] = std::complex<float>(src[x]);
          }
        if (cache) std::copy(clean.begin(), clean.end(), cached[slice].begin() + static_cast<std::ptrdiff_t>(i0 * line));
        emit(rep, slice, i0, i1, clean.data());
      });
    }
  return finish();
}

}  // namespace larmor::phantom
