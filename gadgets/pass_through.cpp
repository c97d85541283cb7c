// Passes every message on unchanged: the smallest valid chain, used to test the plumbing. Untyped on
// purpose: it takes nothing, so pending acquisitions go through it unmaterialised.
#include "gadgets/factories.h"

namespace larmor {
namespace {
class PassThrough final : public Gadget {};
}  // namespace

std::unique_ptr<Gadget> make_pass_through(const config::PassThrough&) { return std::make_unique<PassThrough>(); }

}  // namespace larmor
