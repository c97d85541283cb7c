#include "gadgets/gadget.h"

namespace larmor {

void Gadget::process(Message msg, Emitter& out) { out.emit(std::move(msg)); }

void Gadget::forward(Message& msg, Emitter& out) { out.emit(std::move(msg)); }

}  // namespace larmor
