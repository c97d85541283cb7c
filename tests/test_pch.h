// Precompiled header of the test executables (tests/CMakeLists.txt, LARMOR_TEST_PCH; larmor_test_pch
// builds it once, every tests/*_test.cpp reuses it). It exists for CI's compile time on 2 cores: each
// test TU used to re-parse GoogleTest, the standard library and ISMRMRD (2-3 s of every test's compile,
// 51 times in the normal build and again in the ASan build). What is here is what most tests include
// directly or through core/, wire/ and gadgets/ headers; the precompiled header is force-included into
// each test, so a test still includes what it uses itself and compiles with LARMOR_TEST_PCH=OFF.
// Left out on purpose: POSIX headers (unistd.h & co. put read/write/close/access/... into the global
// namespace of every test) and the generated chain.pb.h (protobuf; only about a fifth of the tests
// include it, and every test would pay for loading its part of the precompiled header).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <complex>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/meta.h>
#include <ismrmrd/waveform.h>
#include <ismrmrd/xml.h>

#include "core/backend.h"
#include "gadgets/gadget.h"
#include "tools/phantom/phantom.h"
#include "wire/codec.h"
