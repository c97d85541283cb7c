#include "tests/support/cartesian_header.h"

namespace larmor::test {

std::string cartesian_header_xml(unsigned x, unsigned y, unsigned z, unsigned channels) {
    const std::string space = "<matrixSize><x>" + std::to_string(x) + "</x><y>" + std::to_string(y) + "</y><z>" +
                              std::to_string(z) +
                              "</z></matrixSize><fieldOfView_mm><x>200</x><y>100</y><z>5</z></fieldOfView_mm>";
    return R"(<?xml version="1.0"?>
<ismrmrdHeader xmlns="http://www.ismrm.org/ISMRMRD">
 <acquisitionSystemInformation><receiverChannels>)" +
           std::to_string(channels) + R"(</receiverChannels></acquisitionSystemInformation>
 <experimentalConditions><H1resonanceFrequency_Hz>63500000</H1resonanceFrequency_Hz></experimentalConditions>
 <encoding>
  <encodedSpace>)" + space + R"(</encodedSpace>
  <reconSpace>)" + space + R"(</reconSpace>
  <encodingLimits>
   <kspace_encoding_step_1><minimum>0</minimum><maximum>)" +
           std::to_string(y - 1) + "</maximum><center>" + std::to_string(y / 2) + R"(</center></kspace_encoding_step_1>
  </encodingLimits>
  <trajectory>cartesian</trajectory>
 </encoding>
</ismrmrdHeader>)";
}

wire::Acquisition cartesian_readout(uint16_t samples, uint16_t channels, uint16_t line, bool last) {
    wire::Acquisition a;
    a.head.version = 1;
    a.head.scan_counter = line;
    a.head.number_of_samples = samples;
    a.head.active_channels = channels;
    a.head.available_channels = channels;
    a.head.center_sample = samples / 2;
    a.head.idx.kspace_encode_step_1 = line;
    if (last) a.head.flags |= uint64_t{1} << (ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE - 1);
    a.data.resize(size_t{samples} * channels);
    return a;
}

}  // namespace larmor::test
