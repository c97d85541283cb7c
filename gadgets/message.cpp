#include "gadgets/message.h"

namespace larmor {
namespace {

// One overload per alternative: a new message type without a name here does not compile.
struct KindName {
    const char* operator()(const Acquisition&) const { return "acquisition"; }
    const char* operator()(const PendingAcquisition&) const { return "pending acquisition"; }
    const char* operator()(const Waveform&) const { return "waveform"; }
    const char* operator()(const ReconBuffer&) const { return "recon buffer"; }
    const char* operator()(const TrajectoryBuffer&) const { return "trajectory buffer"; }
    const char* operator()(const ImageArray&) const { return "image array"; }
    const char* operator()(const Image&) const { return "image"; }
    const char* operator()(const Text&) const { return "text"; }
    const char* operator()(const DicomWithName&) const { return "DICOM file"; }
};

// Host bytes of what came off (or goes onto) the wire; buffers and image arrays hold backend arrays,
// which charge their budgets themselves.
struct HostBytes {
    static uint64_t of(const Acquisition& a) { return a.data.size() * sizeof(cfloat) + a.traj.size() * sizeof(float); }
    uint64_t operator()(const Acquisition& a) const { return of(a); }
    uint64_t operator()(const PendingAcquisition& p) const { return of(p.acq); }
    uint64_t operator()(const Waveform& w) const { return w.data.size() * sizeof(uint32_t); }
    uint64_t operator()(const ReconBuffer&) const { return 0; }
    uint64_t operator()(const TrajectoryBuffer&) const { return 0; }
    uint64_t operator()(const ImageArray&) const { return 0; }
    uint64_t operator()(const Image& i) const { return i.pixels.size() + i.meta.size(); }
    uint64_t operator()(const Text& t) const { return t.text.size(); }
    uint64_t operator()(const DicomWithName& d) const { return d.dicom.size() + d.filename.size() + d.meta_xml.size(); }
};

}  // namespace

const char* message_kind(const Message& m) { return std::visit(KindName{}, m); }

uint64_t host_payload_bytes(const Message& m) { return std::visit(HostBytes{}, m); }

}  // namespace larmor
