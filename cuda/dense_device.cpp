#include "cuda/dense_device.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "cuda/cuda_backend.h"
#include "cuda/dense_kernels.h"
#include "cuda/device_context.h"

namespace larmor::dense::cuda::detail {
namespace {

template <class T>
void check_ours_any(Backend& be, const Array<T>& a, const char* op, const char* name) {
    if (a.size() == 0) return;
    const int want = larmor::cuda::backend_device(be);
    const int got = a.device() == Device::Cuda && a.storage() ? larmor::cuda::storage_device(*a.storage()) : -1;
    if (got != want)
        throw std::invalid_argument(std::string(op) + ": " + name + " " + a.shape().str() +
                                    (got < 0 ? std::string(" is not device memory of the session's CUDA backend")
                                             : " lives on CUDA device " + std::to_string(got)) +
                                    ", the backend is on device " + std::to_string(want));
}

}  // namespace

void check_ours(Backend& be, const CArray& a, const char* op, const char* name) { check_ours_any(be, a, op, name); }
void check_ours(Backend& be, const RArray& a, const char* op, const char* name) { check_ours_any(be, a, op, name); }

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
