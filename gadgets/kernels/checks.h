#pragma once
// Argument validation of the gadget kernels (gadgets/kernels), shared by their CPU and CUDA
// implementations so that both reject the same calls with the same words. Every message names the
// offending value.
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cpu/backend_checks.h"
#include "gadgets/kernels/line_placement.h"

namespace larmor::kernels::checks {

// mix_last_axis: x [..., D], y [..., C], m C*D. Returns {N, D, C} with N the product of the other axes.
struct MixDims {
    size_t n, d, c;
};
inline MixDims check_mix(const CArray& x, size_t m_size, const CArray& y) {
    const Shape& xs = x.shape();
    const Shape& ys = y.shape();
    if (xs.rank() < 1) throw std::invalid_argument("mix_last_axis: x has rank 0");
    if (ys.rank() != xs.rank())
        throw std::invalid_argument("mix_last_axis: y " + ys.str() + " and x " + xs.str() + " differ in rank");
    for (int a = 0; a + 1 < xs.rank(); ++a)
        if (xs[a] != ys[a])
            throw std::invalid_argument("mix_last_axis: y " + ys.str() + " and x " + xs.str() + " differ in axis " +
                                        std::to_string(a));
    MixDims dm{xs.size() / (xs[xs.rank() - 1] ? xs[xs.rank() - 1] : 1), xs[xs.rank() - 1], ys[ys.rank() - 1]};
    if (m_size != dm.c * dm.d)
        throw std::invalid_argument("mix_last_axis: matrix has " + std::to_string(m_size) + " entries, expected C*D = " +
                                    std::to_string(dm.c) + "*" + std::to_string(dm.d) + " for x " + xs.str() +
                                    " and y " + ys.str());
    if (overlaps(x, y))
        throw std::invalid_argument("mix_last_axis: y " + ys.str() + " aliases x; the product needs a distinct output");
    return dm;
}

// place_lines: same first and last axis, placements inside both arrays and distinct.
struct PlaceDims {
    size_t l, k, e, c;
};
// Placements into the e lines of dst, from the k lines of src: in range and distinct.
inline void check_placements(const std::vector<LinePlacement>& where, size_t k, size_t e, const char* op,
                             const Shape& ss, const Shape& ds) {
    if (where.size() > k)
        throw std::invalid_argument(std::string(op) + ": " + std::to_string(where.size()) + " placements for the " +
                                    std::to_string(k) + " lines of src " + ss.str());
    std::vector<bool> seen(e, false);
    for (size_t q = 0; q < where.size(); ++q) {
        const size_t line = where[q].line;
        if (line >= e)
            throw std::invalid_argument(std::string(op) + ": placement " + std::to_string(q) + " targets line " +
                                        std::to_string(line) + " of dst " + ds.str() + ", which has " +
                                        std::to_string(e) + " lines");
        if (seen[line])
            throw std::invalid_argument(std::string(op) + ": line " + std::to_string(line) +
                                        " is targeted twice in one call");
        seen[line] = true;
    }
}

inline PlaceDims check_place_lines(const CArray& src, const std::vector<LinePlacement>& where,
                                   const CArray& dst) {
    const Shape& ss = src.shape();
    const Shape& ds = dst.shape();
    if (ss.rank() < 2 || ds.rank() < 2)
        throw std::invalid_argument("place_lines: src " + ss.str() + " and dst " + ds.str() +
                                    " need at least two axes [L, ..., C]");
    if (ss[0] != ds[0] || ss[ss.rank() - 1] != ds[ds.rank() - 1])
        throw std::invalid_argument("place_lines: src " + ss.str() + " and dst " + ds.str() +
                                    " differ in the line length (first axis) or the channels (last axis)");
    PlaceDims d{ss[0], 0, 0, ss[ss.rank() - 1]};
    d.k = d.l != 0 && d.c != 0 ? ss.size() / (d.l * d.c) : 0;
    d.e = d.l != 0 && d.c != 0 ? ds.size() / (d.l * d.c) : 0;
    check_placements(where, d.k, d.e, "place_lines", ss, ds);
    if (overlaps(src, dst)) throw std::invalid_argument("place_lines: dst " + ds.str() + " aliases src");
    return d;
}

// mix_place_lines: src [L, K, D], dst [L, E, C], m of C * D entries.
struct MixPlaceDims {
    size_t l, k, e, d, c;
};
inline MixPlaceDims check_mix_place_lines(const CArray& src, size_t m_size,
                                          const std::vector<LinePlacement>& where, const CArray& dst) {
    const Shape& ss = src.shape();
    const Shape& ds = dst.shape();
    if (ss.rank() < 2 || ds.rank() < 2)
        throw std::invalid_argument("mix_place_lines: src " + ss.str() + " and dst " + ds.str() +
                                    " need at least two axes [L, ..., channels]");
    if (ss[0] != ds[0])
        throw std::invalid_argument("mix_place_lines: src " + ss.str() + " and dst " + ds.str() +
                                    " differ in the line length (first axis)");
    MixPlaceDims d{ss[0], 0, 0, ss[ss.rank() - 1], ds[ds.rank() - 1]};
    if (m_size != d.c * d.d)
        throw std::invalid_argument("mix_place_lines: matrix has " + std::to_string(m_size) +
                                    " entries, expected C*D = " + std::to_string(d.c) + "*" + std::to_string(d.d) +
                                    " for src " + ss.str() + " and dst " + ds.str());
    d.k = d.l != 0 && d.d != 0 ? ss.size() / (d.l * d.d) : 0;
    d.e = d.l != 0 && d.c != 0 ? ds.size() / (d.l * d.c) : 0;
    check_placements(where, d.k, d.e, "mix_place_lines", ss, ds);
    if (overlaps(src, dst)) throw std::invalid_argument("mix_place_lines: dst " + ds.str() + " aliases src");
    return d;
}

}  // namespace larmor::kernels::checks
