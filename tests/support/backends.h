#pragma once
// Tests parameterised by backend: each runs on the CPU and, where a CUDA device is usable, on CUDA
// (skipped, never failed, without one).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/backend.h"

namespace larmor::test {

// The backend of `d`, or nullptr when it is CUDA and no device is usable.
std::shared_ptr<Backend> backend_for(Device d);

// Name suffix for INSTANTIATE_TEST_SUITE_P.
std::string device_param_name(const ::testing::TestParamInfo<Device>& info);

class BackendTest : public ::testing::TestWithParam<Device> {
protected:
    void SetUp() override {
        be = backend_for(GetParam());
        if (!be) GTEST_SKIP() << "no usable CUDA device";
    }
    std::shared_ptr<Backend> be;
};

#define LARMOR_INSTANTIATE_BACKEND_TEST(Suite)                                                          \
    INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::Values(::larmor::Device::Cpu, ::larmor::Device::Cuda), \
                             ::larmor::test::device_param_name)

}  // namespace larmor::test
