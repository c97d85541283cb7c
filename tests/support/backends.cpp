#include "tests/support/backends.h"

namespace larmor::test {

std::shared_ptr<Backend> backend_for(Device d) {
    if (d == Device::Cpu) return make_cpu_backend();
    return cuda_available() ? make_cuda_backend(0) : nullptr;
}

std::string device_param_name(const ::testing::TestParamInfo<Device>& info) { return device_name(info.param); }

}  // namespace larmor::test
