#pragma once
// Host fallback for the per-readout operations that gadgets before the accumulator only request
// (PendingAcquisition, gadgets/message.h). The accumulator applies them to a whole buffer on the
// session backend instead; the typed gadget base (gadgets/typed_gadget.h) calls materialize() for
// every gadget that takes plain acquisitions only.
#include "gadgets/message.h"

namespace larmor {

// Applies p.ops to p.acq on the host, in the order the accumulator uses (readout oversampling
// removal, then coil mixing: the two commute, and mixing the shorter readout is cheaper), updates
// the header (number_of_samples, center_sample, discard_pre/post, active_channels) and returns the
// plain acquisition. Throws std::runtime_error when the data size or the mixing matrix does not
// match the header's channels and samples.
Acquisition materialize(PendingAcquisition p);

// The header changes of removing 2x readout oversampling: samples, centre sample and discards halve,
// as Gadgetron's RemoveROOversamplingGadget does (sample_time_us is left as it was, as there).
void halve_readout_header(ISMRMRD::ISMRMRD_AcquisitionHeader& head);

// Number of output channels of a mixing matrix of `entries` entries applied to `in_channels`
// channels. Throws std::runtime_error naming both when `entries` is not a multiple of in_channels.
size_t mixed_channels(size_t entries, size_t in_channels);

}  // namespace larmor
