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

}  // namespace

const char* message_kind(const Message& m) { return std::visit(KindName{}, m); }

}  // namespace larmor
