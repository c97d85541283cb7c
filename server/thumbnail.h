#pragma once
// A small picture of a session's latest image for the status page (README "Monitoring"): the middle
// slice of the first channel, reduced by box averaging to at most max_side pixels a side, windowed to
// 8 bits as larmor-client's PNGs are, as a greyscale BMP in a data: URI, so the page needs no other
// request and no assets.
#include <cstddef>
#include <string>

#include "wire/messages.h"

namespace larmor::server {

// Empty when the image has no pixels or a data_type it cannot read.
std::string thumbnail_data_uri(const wire::Image& image, size_t max_side = 96);

}  // namespace larmor::server
