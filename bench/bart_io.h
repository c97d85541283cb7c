#pragma once
// What the programs that run BART beside Larmor share (bench/cg_sense_vs_bart.cpp,
// bench/pics_l1_vs_bart.cpp, bench/nufft_vs_bart.cpp, bench/fhd_vs_bart.cpp): wall-clock medians,
// BART's .cfl/.hdr files and running its commands.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/array.h"

namespace larmor::bench {

inline double seconds(const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median wall time of `runs` calls after one untimed warm-up.
inline double median_time(int runs, const std::function<void()>& f) {
    f();
    std::vector<double> t;
    for (int i = 0; i < runs; ++i) t.push_back(seconds(f));
    std::sort(t.begin(), t.end());
    return t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
}

// BART's .cfl/.hdr: a text header of 16 dimensions, raw complex64, first dimension fastest (our
// memory order, so the array is written as it is).
// `data` holds the product of `dims` elements.
inline void write_cfl(const std::filesystem::path& base, const std::vector<size_t>& dims, const cfloat* data) {
    std::ofstream hdr(base.string() + ".hdr");
    hdr << "# Dimensions\n";
    size_t n = 1;
    for (size_t i = 0; i < 16; ++i) {
        const size_t d = i < dims.size() ? dims[i] : 1;
        n *= d;
        hdr << d << (i < 15 ? " " : "\n");
    }
    std::ofstream cfl(base.string() + ".cfl", std::ios::binary);
    cfl.write(reinterpret_cast<const char*>(data), std::streamsize(n * sizeof(cfloat)));
    if (!hdr || !cfl) throw std::runtime_error("cannot write " + base.string() + ".cfl/.hdr");
}

inline void write_cfl(const std::filesystem::path& base, const CArray& a) {
    std::vector<size_t> dims;
    for (int i = 0; i < a.shape().rank(); ++i) dims.push_back(a.shape()[i]);
    write_cfl(base, dims, a.data());
}

inline std::vector<cfloat> read_cfl(const std::filesystem::path& base, size_t expected) {
    std::ifstream cfl(base.string() + ".cfl", std::ios::binary | std::ios::ate);
    if (!cfl) throw std::runtime_error("cannot read " + base.string() + ".cfl");
    const auto bytes = size_t(cfl.tellg());
    if (bytes != expected * sizeof(cfloat))
        throw std::runtime_error(base.string() + ".cfl has " + std::to_string(bytes) + " bytes, expected " +
                                 std::to_string(expected * sizeof(cfloat)));
    std::vector<cfloat> v(expected);
    cfl.seekg(0);
    cfl.read(reinterpret_cast<char*>(v.data()), std::streamsize(bytes));
    return v;
}

inline void shell(const std::string& cmd) {
    const int rc = std::system(cmd.c_str());
    if (rc != 0) throw std::runtime_error("command failed (status " + std::to_string(rc) + "): " + cmd);
}

inline std::string capture(const std::string& cmd) {
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
        char buf[256];
        while (std::fgets(buf, sizeof buf, p)) out += buf;
        pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

}  // namespace larmor::bench
