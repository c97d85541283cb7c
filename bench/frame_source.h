#pragma once
// The synthetic stream the chain and server benchmarks share: 256x256 frames with 32 coils and 2x
// readout oversampling (512 samples a readout), random-looking data (never zeros: they can run
// faster than real data), one repetition a frame, flagged like a scanner's last line of a slice.
#include <cstdint>
#include <string>

#include "gadgets/message.h"

namespace larmor::bench {

constexpr int kReadout = 512;  // 256 readout points, 2x oversampled
constexpr int kLines = 256;
constexpr int kCoils = 32;

inline std::string frame_header_xml() {
    return R"(<?xml version="1.0"?>
<ismrmrdHeader xmlns="http://www.ismrm.org/ISMRMRD">
 <acquisitionSystemInformation><receiverChannels>32</receiverChannels><relativeReceiverNoiseBandwidth>0.793</relativeReceiverNoiseBandwidth></acquisitionSystemInformation>
 <experimentalConditions><H1resonanceFrequency_Hz>63500000</H1resonanceFrequency_Hz></experimentalConditions>
 <encoding>
  <encodedSpace><matrixSize><x>512</x><y>256</y><z>1</z></matrixSize><fieldOfView_mm><x>600</x><y>300</y><z>5</z></fieldOfView_mm></encodedSpace>
  <reconSpace><matrixSize><x>256</x><y>256</y><z>1</z></matrixSize><fieldOfView_mm><x>300</x><y>300</y><z>5</z></fieldOfView_mm></reconSpace>
  <encodingLimits>
   <kspace_encoding_step_1><minimum>0</minimum><maximum>255</maximum><center>128</center></kspace_encoding_step_1>
   <repetition><minimum>0</minimum><maximum>65535</maximum><center>0</center></repetition>
  </encodingLimits>
  <trajectory>cartesian</trajectory>
 </encoding>
</ismrmrdHeader>)";
}

// Readout `line` of frame `frame` (noise = an ISMRMRD noise scan, flag 19, instead).
inline Acquisition frame_readout(int frame, int line, bool noise = false) {
    Acquisition a;
    a.head.version = 1;
    a.head.number_of_samples = kReadout;
    a.head.active_channels = a.head.available_channels = kCoils;
    a.head.center_sample = kReadout / 2;
    a.head.sample_time_us = 2.5f;
    a.head.read_dir[0] = a.head.phase_dir[1] = a.head.slice_dir[2] = 1.f;
    a.head.scan_counter = uint32_t(frame * kLines + line);
    a.head.idx.kspace_encode_step_1 = uint16_t(line);
    a.head.idx.repetition = uint16_t(frame);
    if (noise) a.head.flags |= uint64_t{1} << (19 - 1);
    if (!noise && line == kLines - 1)
        a.head.flags |= (uint64_t{1} << (8 - 1)) | (uint64_t{1} << (14 - 1));  // last in slice, repetition
    a.data.resize(size_t{kReadout} * kCoils);
    uint32_t seed = uint32_t(7 + line * 131 + (noise ? 100000 : 0));
    for (auto& v : a.data) {
        seed = seed * 1664525u + 1013904223u;
        const float re = float(seed >> 9) * 1.2e-7f - 0.5f;
        seed = seed * 1664525u + 1013904223u;
        v = cfloat(re, float(seed >> 9) * 1.2e-7f - 0.5f);
    }
    return a;
}

}  // namespace larmor::bench
