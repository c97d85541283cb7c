#include "gadgets/message.h"

namespace larmor {

const char* message_kind(const Message& m) {
    static const char* const kNames[] = {"acquisition", "waveform", "k-space buffer", "image array", "image", "text"};
    return kNames[m.index()];
}

}  // namespace larmor
