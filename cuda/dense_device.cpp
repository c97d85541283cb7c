#include "cuda/dense_device.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "cuda/cuda_backend.h"
#include "cuda/dense_kernels.h"
#include "cuda/device_context.h"

namespace larmor::dense::cuda::detail {

// A CArray element is 8 bytes: two ints, or one pointer.
CArray int_scratch(Backend& be, size_t count) { return be.empty({std::max<size_t>(1, (count + 1) / 2)}); }

CArray pointer_scratch(Backend& be, size_t count) {
    static_assert(sizeof(float2*) == sizeof(cfloat), "one pointer per complex element");
    return be.empty({std::max<size_t>(1, count)});
}

InfoFailure first_failure(Backend& be, const int* info, size_t count) {
    CArray result = int_scratch(be, 2);
    {
        larmor::cuda::DeviceGuard g(larmor::cuda::backend_device(be));
        larmor::cuda::launch_first_nonzero(info, static_cast<long long>(count), ints(result),
                                           larmor::cuda::backend_stream(be));
    }
    const CArray host = be.to_host(result);  // waits for the stream
    int v[2];
    std::memcpy(v, host.data(), sizeof v);
    return InfoFailure{v[0], v[1]};
}

std::string call_context(Backend& be, const char* op, const CArray& a) {
    return std::string(op) + " of a " + a.shape().str() + " on CUDA device " +
           std::to_string(larmor::cuda::backend_device(be));
}

}  // namespace larmor::dense::cuda::detail
