#pragma once
// Checks an acquisition gets where it enters the server, before any gadget relies on its header:
// fields that contradict each other refuse the session with a message naming them; non-finite
// samples or trajectory points (a broken converter, a failed coil element) keep the acquisition
// out of the reconstruction and are counted in the session summary, instead of turning the whole
// image into NaN. What the wire codec already bounds (channel and sample counts, sizes) is not
// checked again here.
#include <string>

#include "wire/messages.h"

namespace larmor::server {

struct DoorVerdict {
    enum Kind { Accept, Discard, Refuse };
    Kind kind = Accept;
    // Discard: the reason as the summary lists it; Refuse: the error for the client.
    std::string reason;
};

DoorVerdict check_acquisition(const wire::Acquisition& a);

}  // namespace larmor::server
