// Voronoi-cell density weights (density.h: density_voronoi). Each cell is built on its own by clipping a
// box with the perpendicular bisectors of neighbouring samples (the half-plane definition of a Voronoi
// cell), neighbours visited ring by ring on a bucket grid; the cell's area inside the k disk is then
// computed exactly (polygon ∩ circle).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/trajectory/density.h"

namespace larmor::trajectory {
namespace {

struct Pt {
    double x, y;
};

double cross(Pt a, Pt b) { return a.x * b.y - a.y * b.x; }
double dot(Pt a, Pt b) { return a.x * b.x + a.y * b.y; }

// Keeps the part of the convex polygon `poly` nearer to `site` than to `other` (Sutherland-Hodgman with
// one half-plane: f(p) = (p - mid) . (other - site) <= 0).
void clip(std::vector<Pt>& poly, Pt site, Pt other, std::vector<Pt>& tmp) {
    const Pt d{other.x - site.x, other.y - site.y};
    const Pt m{(site.x + other.x) / 2.0, (site.y + other.y) / 2.0};
    auto f = [&](Pt p) { return (p.x - m.x) * d.x + (p.y - m.y) * d.y; };
    tmp.clear();
    const size_t n = poly.size();
    for (size_t i = 0; i < n; ++i) {
        const Pt a = poly[i], b = poly[(i + 1) % n];
        const double fa = f(a), fb = f(b);
        if (fa <= 0.0) tmp.push_back(a);
        if ((fa < 0.0 && fb > 0.0) || (fa > 0.0 && fb < 0.0)) {
            const double t = fa / (fa - fb);
            tmp.push_back({a.x + t * (b.x - a.x), a.y + t * (b.y - a.y)});
        }
    }
    poly.swap(tmp);
}

// Signed area of triangle (O, a, b) ∩ disk(O, R): the segment is split where it crosses the circle;
// pieces inside contribute their triangle, pieces outside the circular sector they subtend.
double triangle_disk_area(Pt a, Pt b, double R) {
    const Pt d{b.x - a.x, b.y - a.y};
    const double qa = dot(d, d), qb = 2.0 * dot(a, d), qc = dot(a, a) - R * R;
    double ts[4] = {0.0, 0.0, 0.0, 1.0};
    int nt = 1;
    const double disc = qb * qb - 4.0 * qa * qc;
    if (qa > 0.0 && disc > 0.0) {
        const double sq = std::sqrt(disc);
        for (double t : {(-qb - sq) / (2.0 * qa), (-qb + sq) / (2.0 * qa)})
            if (t > 0.0 && t < 1.0) ts[nt++] = t;
    }
    ts[nt++] = 1.0;
    double area = 0.0;
    for (int i = 0; i + 1 < nt; ++i) {
        const Pt p{a.x + ts[i] * d.x, a.y + ts[i] * d.y}, q{a.x + ts[i + 1] * d.x, a.y + ts[i + 1] * d.y};
        const Pt mid{(p.x + q.x) / 2.0, (p.y + q.y) / 2.0};
        // A piece without crossings is wholly inside or outside; its ends may sit on the circle (crossings,
        // rounding), and a tangent piece has only its midpoint there, so all three points must be inside.
        const double in = R * R * (1.0 + 1e-12);
        if (dot(mid, mid) <= in && dot(p, p) <= in && dot(q, q) <= in)
            area += 0.5 * cross(p, q);
        else
            area += 0.5 * R * R * std::atan2(cross(p, q), dot(p, q));
    }
    return area;
}

double polygon_disk_area(const std::vector<Pt>& poly, double R) {
    double area = 0.0;
    for (size_t i = 0; i < poly.size(); ++i) area += triangle_disk_area(poly[i], poly[(i + 1) % poly.size()], R);
    return std::abs(area);
}

uint32_t bits(float v) {
    v += 0.0f;  // -0 and +0 are one point
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}

}  // namespace

RArray density_voronoi(const RArray& coords, double kmax) {
    if (coords.device() != Device::Cpu || coords.shape().rank() != 3 || coords.shape()[0] != 2)
        throw std::invalid_argument("density_voronoi: coordinates must be a host [2, samples, readouts] array, got " +
                                    coords.shape().str());
    if (!(std::isfinite(kmax) && kmax > 0.0))
        throw std::invalid_argument("density_voronoi: kmax must be positive, got " + std::to_string(kmax));
    const size_t total = coords.shape()[1] * coords.shape()[2];
    const float* k = coords.data();

    // Unique sites; exact duplicates share a cell.
    std::unordered_map<uint64_t, int> seen;
    std::vector<int> site_of(total);
    std::vector<Pt> sites;
    std::vector<int> multiplicity;
    for (size_t i = 0; i < total; ++i) {
        if (!std::isfinite(k[2 * i]) || !std::isfinite(k[2 * i + 1]))
            throw std::invalid_argument("density_voronoi: sample " + std::to_string(i) + " is not finite");
        const uint64_t key = (static_cast<uint64_t>(bits(k[2 * i])) << 32) | bits(k[2 * i + 1]);
        auto [it, fresh] = seen.emplace(key, static_cast<int>(sites.size()));
        if (fresh) {
            sites.push_back({k[2 * i] + 0.0, k[2 * i + 1] + 0.0});
            multiplicity.push_back(0);
        }
        site_of[i] = it->second;
        ++multiplicity[static_cast<size_t>(it->second)];
    }

    // Bucket grid over the box [-B, B]^2 that holds every site and the disk (with a margin, so no box edge
    // is tangent to the circle), about 2 sites per bucket.
    double B = 1.0625 * kmax;
    for (const Pt& p : sites) B = std::max({B, std::abs(p.x), std::abs(p.y)});
    const int G = std::max(1, static_cast<int>(std::sqrt(sites.size() / 2.0)));
    const double h = 2.0 * B / G;
    auto bucket = [&](double v) { return std::clamp(static_cast<int>(std::floor((v + B) / h)), 0, G - 1); };
    std::vector<int> start(static_cast<size_t>(G) * G + 1, 0), members(sites.size());
    for (const Pt& p : sites) ++start[static_cast<size_t>(bucket(p.y)) * G + bucket(p.x) + 1];
    for (size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
    {
        std::vector<int> fill(start.begin(), start.end() - 1);
        for (size_t i = 0; i < sites.size(); ++i)
            members[static_cast<size_t>(fill[static_cast<size_t>(bucket(sites[i].y)) * G + bucket(sites[i].x)]++)] =
                static_cast<int>(i);
    }

    std::vector<double> area(sites.size());
    const long long nsites = static_cast<long long>(sites.size());
#pragma omp parallel
    {
        std::vector<Pt> poly, tmp;
#pragma omp for schedule(dynamic, 64)
        for (long long si = 0; si < nsites; ++si) {
            const Pt s = sites[static_cast<size_t>(si)];
            poly = {{-B, -B}, {B, -B}, {B, B}, {-B, B}};
            const int bx = bucket(s.x), by = bucket(s.y);
            for (int ring = 0; ring <= G; ++ring) {
                // Unvisited sites lie in rings >= ring, at least (ring - 1) h away; a site cuts the cell only
                // if it is nearer than twice the cell's farthest vertex.
                double far2 = 0.0;
                for (const Pt& v : poly) far2 = std::max(far2, (v.x - s.x) * (v.x - s.x) + (v.y - s.y) * (v.y - s.y));
                if (ring >= 1 && (ring - 1) * h > 2.0 * std::sqrt(far2)) break;
                for (int y = by - ring; y <= by + ring; ++y) {
                    if (y < 0 || y >= G) continue;
                    const bool edge_row = y == by - ring || y == by + ring;
                    for (int x = bx - ring; x <= bx + ring; x += edge_row ? 1 : 2 * std::max(ring, 1)) {
                        if (x >= 0 && x < G) {
                            const size_t b = static_cast<size_t>(y) * G + x;
                            for (int m = start[b]; m < start[b + 1]; ++m)
                                if (members[static_cast<size_t>(m)] != si) clip(poly, s, sites[static_cast<size_t>(members[static_cast<size_t>(m)])], tmp);
                        }
                        if (ring == 0) break;
                    }
                }
            }
            area[static_cast<size_t>(si)] = polygon_disk_area(poly, kmax);
        }
    }

    RArray w = RArray::host(Shape{coords.shape()[1], coords.shape()[2]});
    for (size_t i = 0; i < total; ++i) {
        const size_t u = static_cast<size_t>(site_of[i]);
        w.data()[i] = static_cast<float>(area[u] / multiplicity[u]);
    }
    return w;
}

}  // namespace larmor::trajectory
