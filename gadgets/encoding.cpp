#include "gadgets/encoding.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/memory_budget.h"

namespace larmor {
namespace {

// Limits of one encode step, defaulting to the whole matrix when the header leaves them out. Whether
// every line fits the matrix is checked per readout by the accumulator (naming the scan counter).
void read_limits(const ISMRMRD::Optional<ISMRMRD::Limit>& lim, uint16_t matrix, const char* name,
                 uint16_t& lo, uint16_t& hi, uint16_t& centre) {
    if (lim) {
        lo = lim->minimum;
        hi = lim->maximum;
        centre = lim->center;
    } else {
        lo = 0;
        hi = uint16_t(matrix - 1);
        centre = uint16_t(matrix / 2);
    }
    if (lo > hi)
        throw std::runtime_error(std::string("ISMRMRD header: encodingLimits.") + name + " minimum " +
                                 std::to_string(lo) + " exceeds maximum " + std::to_string(hi));
}

}  // namespace

EncodingGeometry encoding_geometry(const ISMRMRD::IsmrmrdHeader& header, size_t index) {
    if (header.encoding.empty())
        throw std::runtime_error("ISMRMRD header has no <encoding> section");
    if (index >= header.encoding.size())
        throw std::runtime_error("encoding space " + std::to_string(index) + " requested, but the ISMRMRD header has " +
                                 std::to_string(header.encoding.size()) + " encoding section(s)");
    const ISMRMRD::Encoding& e = header.encoding[index];
    EncodingGeometry g;
    const auto& em = e.encodedSpace.matrixSize;
    const auto& rm = e.reconSpace.matrixSize;
    g.encoded_matrix[0] = em.x;
    g.encoded_matrix[1] = em.y;
    g.encoded_matrix[2] = em.z;
    g.recon_matrix[0] = rm.x;
    g.recon_matrix[1] = rm.y;
    g.recon_matrix[2] = rm.z;
    const char* axis[3] = {"x", "y", "z"};
    for (int i = 0; i < 3; ++i) {
        if (g.encoded_matrix[i] == 0)
            throw std::runtime_error(std::string("ISMRMRD header: encodedSpace.matrixSize.") + axis[i] + " is 0");
        if (g.recon_matrix[i] == 0)
            throw std::runtime_error(std::string("ISMRMRD header: reconSpace.matrixSize.") + axis[i] + " is 0");
    }
    g.encoded_fov[0] = e.encodedSpace.fieldOfView_mm.x;
    g.encoded_fov[1] = e.encodedSpace.fieldOfView_mm.y;
    g.encoded_fov[2] = e.encodedSpace.fieldOfView_mm.z;
    g.recon_fov[0] = e.reconSpace.fieldOfView_mm.x;
    g.recon_fov[1] = e.reconSpace.fieldOfView_mm.y;
    g.recon_fov[2] = e.reconSpace.fieldOfView_mm.z;
    read_limits(e.encodingLimits.kspace_encoding_step_1, g.encoded_matrix[1], "kspace_encoding_step_1", g.e1_min,
                g.e1_max, g.e1_centre);
    read_limits(e.encodingLimits.kspace_encoding_step_2, g.encoded_matrix[2], "kspace_encoding_step_2", g.e2_min,
                g.e2_max, g.e2_centre);
    return g;
}

namespace {
uint64_t largest_matrix(const ISMRMRD::IsmrmrdHeader& header) {
    uint64_t largest = 0;
    for (const auto& e : header.encoding) {
        const auto& m = e.encodedSpace.matrixSize;
        largest = std::max(largest, saturating_mul(saturating_mul(m.x, m.y), std::max<uint64_t>(m.z, 1)));
    }
    return largest;
}
}  // namespace

uint64_t declared_kspace_bytes(const ISMRMRD::IsmrmrdHeader& header, uint64_t copies) {
    uint64_t channels = 1;
    if (header.acquisitionSystemInformation && header.acquisitionSystemInformation->receiverChannels)
        channels = std::max<uint64_t>(*header.acquisitionSystemInformation->receiverChannels, 1);
    return saturating_mul(saturating_mul(saturating_mul(largest_matrix(header), channels), sizeof(float) * 2), copies);
}

uint64_t declared_image_bytes(const ISMRMRD::IsmrmrdHeader& header, uint64_t copies) {
    return saturating_mul(saturating_mul(largest_matrix(header), sizeof(float) * 2), copies);
}

}  // namespace larmor
