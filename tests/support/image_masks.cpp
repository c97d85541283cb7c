#include "tests/support/image_masks.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace larmor::test {

std::vector<char> grow(const std::vector<char>& m, size_t nx, size_t ny, int margin) {
    std::vector<char> g(m.size(), 0);
    for (size_t y = 0; y < ny; ++y)
        for (size_t x = 0; x < nx; ++x) {
            if (!m[y * nx + x]) continue;
            for (int dy = -margin; dy <= margin; ++dy)
                for (int dx = -margin; dx <= margin; ++dx) {
                    const long yy = long(y) + dy, xx = long(x) + dx;
                    if (yy >= 0 && xx >= 0 && yy < long(ny) && xx < long(nx)) g[size_t(yy) * nx + size_t(xx)] = 1;
                }
        }
    return g;
}


Aliasing aliasing(const std::vector<double>& img, const std::vector<double>& acs, size_t nx, size_t ny) {
    const double peak = *std::max_element(acs.begin(), acs.end());
    std::vector<char> core(acs.size());
    for (size_t i = 0; i < acs.size(); ++i) core[i] = acs[i] > 0.1 * peak;
    const std::vector<char> support = grow(core, nx, ny, 3), wide = grow(core, nx, ny, 8);
    std::vector<char> ghost(img.size(), 0);
    const size_t shift = ny / 3;
    for (size_t y = 0; y < ny; ++y)
        for (size_t x = 0; x < nx; ++x)
            for (size_t s : {shift, ny - shift}) {
                const size_t from = ((y + s) % ny) * nx + x;
                if (core[from] && !wide[y * nx + x]) ghost[y * nx + x] = 1;
            }
    const std::vector<char> ghost_wide = grow(ghost, nx, ny, 4);
    double in = 0, g = 0, b = 0;
    size_t n_in = 0, n_g = 0, n_b = 0;
    for (size_t i = 0; i < img.size(); ++i) {
        if (support[i]) in += img[i], ++n_in;
        else if (ghost[i]) g += img[i], ++n_g;
        else if (!wide[i] && !ghost_wide[i]) b += img[i], ++n_b;
    }
    EXPECT_GT(n_g, 100u) << "no ghost region: the metric would be vacuous";
    EXPECT_GT(n_b, 100u);
    return {(g / double(n_g)) / (in / double(n_in)), (b / double(n_b)) / (in / double(n_in))};
}

}  // namespace larmor::test
