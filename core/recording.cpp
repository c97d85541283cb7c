#include "core/recording.h"

#include <utility>

#include "core/backend.h"

namespace larmor {
namespace {

class DirectRecording final : public Recording {
public:
    DirectRecording(std::function<void()> body, std::string why) : body_(std::move(body)), why_(std::move(why)) {}
    void replay() override { body_(); }
    bool captured() const override { return false; }
    const std::string& why_not_captured() const override { return why_; }

private:
    std::function<void()> body_;
    std::string why_;
};

}  // namespace

std::unique_ptr<Recording> direct_recording(std::function<void()> body, std::string why_not) {
    if (!body) throw std::invalid_argument("record: empty body");
    return std::make_unique<DirectRecording>(std::move(body), std::move(why_not));
}

std::unique_ptr<Recording> Backend::record(std::function<void()> body) {
    return direct_recording(std::move(body), "the " + describe() + " backend runs the body");
}

}  // namespace larmor
