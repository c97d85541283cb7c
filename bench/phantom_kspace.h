#pragma once
// larmor-phantom's analytic k-space [nx, ny, 1, C] as a host array, no readout oversampling: the
// calibration benchmarks' (ESPIRiT, GRAPPA, SPIRiT) input.
#include <algorithm>
#include <complex>
#include <vector>

#include "core/array.h"
#include "tools/phantom/phantom.h"

namespace larmor::bench {

inline CArray phantom_kspace(int nx, int ny, int coils) {
    phantom::PhantomSpec s;
    s.nx = nx;
    s.ny = ny;
    s.coils = coils;
    s.ro_oversampling = 1;
    const phantom::Phantom ph(s);
    const std::vector<std::complex<float>> k = ph.kspace_all();
    CArray a = CArray::host({size_t(nx), size_t(ny), 1, size_t(coils)});
    std::copy(k.begin(), k.end(), a.data());
    return a;
}

}  // namespace larmor::bench
