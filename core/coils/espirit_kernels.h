#pragma once
// ESPIRiT's per-pixel step (core/coils/espirit.h), one CPU definition (core/coils/espirit_cpu.cpp) and
// one CUDA definition (cuda/espirit.cu; a build without nvcc has a stub that throws). For every pixel
// (x, y) of an N1 x N2 grid they evaluate the C x C matrix
//     G(x, y) = sum_{dx, dy} K[dx, dy] ex[x, dx] ey[y, dy]
// separably (first along x: H[x, dy] = sum_dx K[dx, dy] ex[x, dx]; then G = sum_dy H[x, dy] ey[y, dy]),
// find its dominant eigenvector by power iteration from the column of G with the largest diagonal
// entry, and write it, rotated so that its projection on `principal` is real and positive, or zeros
// where the Rayleigh quotient is below `crop`. With two sets, the second is the dominant eigenvector of
// G deflated by the first, G - lambda_1 v_1 v_1^H (its second eigenvector), phased and cropped alike.
#include <cstddef>

#include "core/backend.h"

namespace larmor::coils {

struct EspiritPixelProblem {
    size_t n1 = 0, n2 = 0;  // pixels along x and y
    size_t coils = 0;       // C
    size_t offsets = 0;     // D = 2k - 1 window offsets per axis
    int iterations = 0;
    float crop = 0.f;
    int sets = 1;           // maps per pixel: 1 or 2
};

// Layouts (all x / first index fastest):
//   k          [C, C, D, D]: element (c, c') of offset (dx, dy) at c + C (c' + C (dx + D dy))
//   ex, ey     [D, N1], [D, N2]: exp(+2 pi i (d - (k - 1)) (x - N1 / 2) / N1) at d + D x
//   principal  [C]
//   maps       [N1, N2, C, sets]; eigenvalues [N1, N2, sets] (G's largest eigenvalues, before the crop)
namespace cpu {
void espirit_eigenvectors(const CArray& k, const CArray& ex, const CArray& ey, const CArray& principal, CArray& maps,
                          RArray& eigenvalues, const EspiritPixelProblem& p);
}  // namespace cpu

namespace cuda {
// The same on the backend's device (every array there), queued on the backend's stream.
void espirit_eigenvectors(Backend& be, const CArray& k, const CArray& ex, const CArray& ey, const CArray& principal,
                          CArray& maps, RArray& eigenvalues, const EspiritPixelProblem& p);
}  // namespace cuda

}  // namespace larmor::coils
