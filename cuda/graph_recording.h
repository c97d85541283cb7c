#pragma once
// Backend::record on CUDA (core/recording.h): the work `body` queues is captured from the session's
// capture stream (DeviceContext::begin_recording) into a CUDA graph, instantiated once; replay()
// launches it on the compute stream, one host call for the whole sequence. A body that cannot be
// captured (it allocates, waits, reads back, or the capture fails for another reason) gives a
// recording that calls the body on replay, and says why.
#include <functional>
#include <memory>

#include "core/recording.h"
#include "cuda/device_context.h"

namespace larmor::cuda {

std::unique_ptr<Recording> record_graph(const std::shared_ptr<DeviceContext>& ctx, std::function<void()> body);

}  // namespace larmor::cuda
