#pragma once
// Pixel masks for image-quality checks (object support, ghost regions).
#include <cstddef>
#include <vector>

namespace larmor::test {

// The mask m (nx x ny, x fastest) grown by `margin` pixels in x and y (a square structuring element).
std::vector<char> grow(const std::vector<char>& m, size_t nx, size_t ny, int margin);

// Residual aliasing of an R=3 image (nx x ny magnitudes): the object's support (from the unaliased ACS
// image `acs`, grown by a margin for its blur) shifted by +-1/3 of the FOV along y marks where fold-over
// ghosts land; the mean magnitude there (outside the support) over the mean magnitude inside is the
// ghost ratio. Far from both, the background ratio is the noise floor the ghost ratio can at best reach.
// Fails the calling test (gtest) when either region is too small for the measure to mean anything.
struct Aliasing {
    double ghost = 0, background = 0;
};
Aliasing aliasing(const std::vector<double>& img, const std::vector<double>& acs, size_t nx, size_t ny);

}  // namespace larmor::test
