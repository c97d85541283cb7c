#include "tests/support/small_scan.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <variant>

#include <gtest/gtest.h>
#include <ismrmrd/ismrmrd.h>

#include "tests/support/server_process.h"

namespace larmor::test {

std::string small_scan_header(const SmallScan& s) {
    const std::string m = std::to_string(s.matrix), ro = std::to_string(2 * s.matrix);
    return R"(<?xml version="1.0"?>
<ismrmrdHeader xmlns="http://www.ismrm.org/ISMRMRD">
 <acquisitionSystemInformation><receiverChannels>)" + std::to_string(s.coils) + R"(</receiverChannels></acquisitionSystemInformation>
 <experimentalConditions><H1resonanceFrequency_Hz>63500000</H1resonanceFrequency_Hz></experimentalConditions>
 <encoding>
  <encodedSpace><matrixSize><x>)" + ro + "</x><y>" + m + R"(</y><z>1</z></matrixSize><fieldOfView_mm><x>400</x><y>200</y><z>5</z></fieldOfView_mm></encodedSpace>
  <reconSpace><matrixSize><x>)" + m + "</x><y>" + m + R"(</y><z>1</z></matrixSize><fieldOfView_mm><x>200</x><y>200</y><z>5</z></fieldOfView_mm></reconSpace>
  <encodingLimits>
   <kspace_encoding_step_1><minimum>0</minimum><maximum>)" + std::to_string(s.matrix - 1) + "</maximum><center>" +
           std::to_string(s.matrix / 2) + R"(</center></kspace_encoding_step_1>
   <repetition><minimum>0</minimum><maximum>)" + std::to_string(s.repetitions - 1) + R"(</maximum><center>0</center></repetition>
  </encodingLimits>
  <trajectory>cartesian</trajectory>
 </encoding>
</ismrmrdHeader>)";
}

std::vector<wire::Acquisition> small_scan_acquisitions(const SmallScan& s, const std::vector<float>& scales) {
    std::vector<wire::Acquisition> out;
    const uint16_t ro = uint16_t(2 * s.matrix);
    for (uint16_t r = 0; r < s.repetitions; ++r)
        for (uint16_t line = 0; line < s.matrix; ++line) {
            wire::Acquisition a;
            a.head.version = 1;
            a.head.scan_counter = uint32_t(r) * s.matrix + line;
            a.head.number_of_samples = ro;
            a.head.active_channels = s.coils;
            a.head.available_channels = s.coils;
            a.head.center_sample = ro / 2;
            a.head.sample_time_us = 5.0f;
            a.head.idx.kspace_encode_step_1 = line;
            a.head.idx.repetition = r;
            if (line == 0) a.head.flags |= uint64_t{1} << (ISMRMRD::ISMRMRD_ACQ_FIRST_IN_REPETITION - 1);
            if (line + 1 == s.matrix) a.head.flags |= uint64_t{1} << (ISMRMRD::ISMRMRD_ACQ_LAST_IN_REPETITION - 1);
            a.data.resize(size_t{ro} * s.coils);
            // A smooth object per coil: a few low-frequency components, different for each coil.
            for (uint16_t c = 0; c < s.coils; ++c)
                for (uint16_t x = 0; x < ro; ++x) {
                    const float kx = float(x) - ro / 2, ky = float(line) - s.matrix / 2;
                    const float amp = 1.0f / (1.0f + 0.05f * (kx * kx + ky * ky)) * (1.0f + 0.25f * c);
                    const float phase = 0.1f * c + 0.01f * float(x + 3 * line);
                    a.data[size_t{c} * ro + x] = scales[r] * std::complex<float>(amp * std::cos(phase), amp * std::sin(phase));
                }
            out.push_back(std::move(a));
        }
    return out;
}

std::vector<wire::Image> images_by_repetition(const std::vector<wire::WireMessage>& reply, const SmallScan& s) {
    std::vector<wire::Image> images(s.repetitions);
    std::vector<int> seen(s.repetitions, 0);
    for (const auto& m : reply) {
        if (const auto* t = std::get_if<wire::Text>(&m)) {
            EXPECT_EQ(t->text.find("ERROR"), std::string::npos) << t->text;
        } else if (const auto* im = std::get_if<wire::Image>(&m)) {
            const uint16_t r = im->head.repetition;
            if (r >= s.repetitions) {
                ADD_FAILURE() << "image of repetition " << r << " in a scan of " << s.repetitions;
                continue;
            }
            ++seen[r];
            images[r] = *im;
        }
    }
    EXPECT_FALSE(reply.empty() || !std::holds_alternative<wire::Close>(reply.back())) << "the reply must end with CLOSE";
    for (uint16_t r = 0; r < s.repetitions; ++r) EXPECT_EQ(seen[r], 1) << "images of repetition " << r;
    return images;
}

double relative_image_error(const wire::Image& got, const wire::Image& ref, float scale) {
    if (got.head.data_type != ISMRMRD::ISMRMRD_FLOAT || ref.head.data_type != ISMRMRD::ISMRMRD_FLOAT ||
        got.pixels.size() != ref.pixels.size() || ref.pixels.empty() ||
        std::memcmp(got.head.matrix_size, ref.head.matrix_size, sizeof ref.head.matrix_size) != 0)
        return 1.0;
    const size_t n = ref.pixels.size() / sizeof(float);
    std::vector<float> g(n), r(n);
    std::memcpy(g.data(), got.pixels.data(), n * sizeof(float));
    std::memcpy(r.data(), ref.pixels.data(), n * sizeof(float));
    double peak = 0, err = 0;
    for (size_t i = 0; i < n; ++i) {
        peak = std::max(peak, std::abs(double(scale) * r[i]));
        err = std::max(err, std::abs(double(g[i]) - double(scale) * r[i]));
    }
    return peak > 0 ? err / peak : 1.0;
}

std::vector<uint8_t> small_scan_image(uint16_t port, const SmallScan& s) {
    WireConnection c(port, std::chrono::seconds(120));
    c.send(wire::ConfigFile{"cartesian-rss"});
    c.send(wire::ParameterScript{small_scan_header(s)});
    for (const auto& a : small_scan_acquisitions(s, std::vector<float>(s.repetitions, 1.f))) c.send(a);
    c.send(wire::Close{});
    // images_by_repetition fails the test when the image did not come or came with an error.
    const std::vector<wire::Image> images = images_by_repetition(c.receive_until_close(), s);
    return images.empty() ? std::vector<uint8_t>() : images[0].pixels;
}

}  // namespace larmor::test
