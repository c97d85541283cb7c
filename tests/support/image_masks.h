#pragma once
// Pixel masks for image-quality checks (object support, ghost regions).
#include <cstddef>
#include <vector>

namespace larmor::test {

// The mask m (nx x ny, x fastest) grown by `margin` pixels in x and y (a square structuring element).
std::vector<char> grow(const std::vector<char>& m, size_t nx, size_t ny, int margin);

}  // namespace larmor::test
