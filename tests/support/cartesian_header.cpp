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

}  // namespace larmor::test
