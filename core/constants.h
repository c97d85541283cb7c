#pragma once
// Mathematical constants shared by the library (one definition: sources are also compiled as unity
// batches in the sanitizer builds, where per-file copies would collide).

namespace larmor {

inline constexpr double kPi = 3.14159265358979323846;

}  // namespace larmor
