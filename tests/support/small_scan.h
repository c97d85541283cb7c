#pragma once
// A small synthetic Cartesian scan for tests that run many sessions against a real server (load and
// soak): a few coils, a few repetitions, every sample scaled by a factor, so that each session's
// images are the reference images times that factor. The chains it is meant for (cartesian-rss) are
// linear up to the final magnitude, so a returned image that belongs to another session, or is
// corrupted, does not match.
#include <cstdint>
#include <string>
#include <vector>

#include "wire/codec.h"

namespace larmor::test {

struct SmallScan {
    uint16_t matrix = 32;       // recon matrix (square); the readout is 2x oversampled
    uint16_t coils = 4;
    uint16_t repetitions = 1;   // one image per repetition
};

// The ISMRMRD XML header of the scan.
std::string small_scan_header(const SmallScan& s);

// Every acquisition of the scan, repetition r scaled by scales[r] (scales.size() == repetitions).
std::vector<wire::Acquisition> small_scan_acquisitions(const SmallScan& s, const std::vector<float>& scales);

// The images (by repetition) in a session's reply; fails the test (and returns what there is) when
// the reply holds an ERROR text, no CLOSE, or an image of an unknown repetition.
std::vector<wire::Image> images_by_repetition(const std::vector<wire::WireMessage>& reply, const SmallScan& s);

// One session of the scan (scales 1) through cartesian-rss on a real server at 127.0.0.1:port: the
// pixel bytes of its one image (empty, with the test failed, when it did not come).
std::vector<uint8_t> small_scan_image(uint16_t port, const SmallScan& s = {});

// Largest |got - scale * ref| over the float pixels relative to scale * max |ref|; 1 when the images
// differ in type or size.
double relative_image_error(const wire::Image& got, const wire::Image& ref, float scale);

}  // namespace larmor::test
