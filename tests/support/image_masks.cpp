#include "tests/support/image_masks.h"

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

}  // namespace larmor::test
