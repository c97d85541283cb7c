#include "gadgets/line_ops.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/backend.h"
#include "gadgets/kernels/line_placement.h"

namespace larmor {
namespace {

// A small single-threaded CPU backend per calling thread: each gadget runs on its own thread, and a
// backend is not shared between threads (core/backend.h). Created on first use: materialising is
// rare (only chains that put a line-wise gadget between NoiseAdjust/ROOS and the accumulator).
Backend& host_backend() {
    thread_local std::shared_ptr<Backend> backend = make_cpu_backend(1);
    return *backend;
}

}  // namespace

void halve_readout_header(ISMRMRD::ISMRMRD_AcquisitionHeader& head) {
    head.number_of_samples = uint16_t(head.number_of_samples / 2);
    head.center_sample = uint16_t(head.center_sample / 2);
    head.discard_pre = uint16_t(head.discard_pre / 2);
    head.discard_post = uint16_t(head.discard_post / 2);
}

size_t mixed_channels(size_t entries, size_t in_channels) {
    if (in_channels == 0 || entries % in_channels != 0 || entries == 0)
        throw std::runtime_error("coil mixing matrix of " + std::to_string(entries) + " entries cannot mix " +
                                 std::to_string(in_channels) + " channels");
    return entries / in_channels;
}

Acquisition materialize(PendingAcquisition p) {
    Acquisition& acq = p.acq;
    const LineOps& ops = p.ops;
    if (ops.empty()) return std::move(acq);
    const size_t channels = acq.head.active_channels;
    const size_t samples = acq.head.number_of_samples;
    if (acq.data.size() != channels * samples)
        throw std::runtime_error("acquisition " + std::to_string(acq.head.scan_counter) + ": " +
                                 std::to_string(acq.data.size()) + " samples of data for " +
                                 std::to_string(channels) + " channels x " + std::to_string(samples) +
                                 " samples in the header");
    Backend& be = host_backend();
    // [samples, channels]: the ISMRMRD layout of Acquisition::data, channel last.
    CArray x = CArray::host({samples, channels});
    std::copy(acq.data.begin(), acq.data.end(), x.data());

    if (ops.remove_ro_oversampling) {
        // Readout to image space, keep the centre half of the FOV, back to k-space (orthonormal FFTs,
        // so image values are unchanged by the round trip).
        be.fft(x, x, 1u, FFTDirection::Inverse);
        CArray y = CArray::host({samples / 2, channels});
        be.crop_pad_centred(x, y);
        be.fft(y, y, 1u, FFTDirection::Forward);
        x = y;
        halve_readout_header(acq.head);
    }
    if (ops.coil_mix) {
        const std::vector<cfloat>& m = *ops.coil_mix;
        const size_t out_channels = mixed_channels(m.size(), channels);
        CArray y = CArray::host({x.shape()[0], out_channels});
        kernels::mix_last_axis(be, x, m, y);
        x = y;
        acq.head.active_channels = uint16_t(out_channels);
    }
    acq.data.assign(x.data(), x.data() + x.size());
    return std::move(acq);
}

}  // namespace larmor
