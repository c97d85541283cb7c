#pragma once
// The magnitude of an ISMRMRD image a client sent (IMAGE, 1022), whatever its pixel type, as floats:
// what a gadget needs of a reference image (anatomical edges), not the image itself.
#include <vector>

#include "gadgets/message.h"

namespace larmor {

// Pixels x fastest over matrix_size[0..2]; several channels are combined by root sum of squares.
// Throws std::runtime_error naming the value when the data type is unknown, the matrix or channel
// count is zero, or the pixel bytes do not match the header.
std::vector<float> image_magnitude(const Image& image);

}  // namespace larmor
