#include "core/recon/l1_spirit_slabs.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace larmor {
namespace {

// Rows [first, first + count) along axis 0 of the host mask, whose axis 0 has `n` entries, into `out`.
void mask_rows(const RArray& a, size_t n, size_t first, size_t count, RArray& out) {
    const size_t lines = a.size() / n;
    for (size_t l = 0; l < lines; ++l)
        std::copy(a.data() + l * n + first, a.data() + l * n + first + count, out.data() + l * count);
}

Shape with_rows(Shape s, size_t count) {
    s[0] = count;
    return s;
}

// ||kspace||^2 in double: the orthonormal FFT keeps it, so it is the zero-filled images' energy.
double energy(Backend& be, const CArray& kspace) {
    if (kspace.device() == Device::Cpu) {
        double e = 0;
        for (size_t i = 0; i < kspace.size(); ++i) e += std::norm(std::complex<double>(kspace.data()[i]));
        return e;
    }
    CArray n = be.zeros({1});
    be.norm2(kspace, n);
    return std::real(be.to_host(n).data()[0]);
}

}  // namespace

std::vector<Slab> plan_slabs(size_t ro, size_t backends, size_t slices_per_slab) {
    if (backends == 0) throw std::invalid_argument("plan_slabs: no backends to split " + std::to_string(ro) +
                                                   " readout positions over");
    if (ro == 0) throw std::invalid_argument("plan_slabs: no readout positions");
    std::vector<Slab> slabs;
    if (slices_per_slab == 0) {
        const size_t n = std::min(ro, backends), base = ro / n, extra = ro % n;
        size_t first = 0;
        for (size_t i = 0; i < n; ++i) {
            const size_t count = base + (i < extra ? 1 : 0);
            slabs.push_back(Slab{first, count, i});
            first += count;
        }
        return slabs;
    }
    for (size_t first = 0, i = 0; first < ro; first += slices_per_slab, ++i)
        slabs.push_back(Slab{first, std::min(slices_per_slab, ro - first), i % backends});
    return slabs;
}

L1SpiritSlabs::L1SpiritSlabs(const std::vector<std::shared_ptr<Backend>>& backends, const CArray& kspace,
                             const RArray& mask, const coils::SpiritKernels& kernels, const L1SpiritSettings& settings,
                             size_t slices_per_slab)
    : shape_(kspace.shape()), iterations_(settings.iterations), tolerance_(settings.tolerance) {
    for (size_t i = 0; i < backends.size(); ++i)
        if (!backends[i]) throw std::invalid_argument("l1_spirit slabs: backend " + std::to_string(i) + " is null");
    const Shape& s = kspace.shape();
    if (s.rank() != 4 || s[2] < 2)
        throw std::invalid_argument("l1_spirit slabs: k-space " + s.str() + " should be [RO, E1, E2 > 1, C]");
    if (mask.shape() != Shape{s[0], s[1], s[2]})
        throw std::invalid_argument("l1_spirit slabs: mask " + mask.shape().str() + " should be " +
                                    Shape{s[0], s[1], s[2]}.str() + " for k-space " + s.str());
    if (kernels.dims != 3 || kernels.coils != s[3])
        throw std::invalid_argument("l1_spirit slabs: " + std::to_string(kernels.dims) + "D kernels of " +
                                    std::to_string(kernels.coils) + " coils for 3D k-space " + s.str());
    if (!(settings.lambda >= 0.f))
        throw std::invalid_argument("l1_spirit slabs: lambda " + std::to_string(settings.lambda) + " < 0");
    if (settings.iterations < 1)
        throw std::invalid_argument("l1_spirit slabs: iterations " + std::to_string(settings.iterations) + " < 1");
    const std::vector<Slab> plan = plan_slabs(s[0], backends.size(), slices_per_slab);
    Backend& first = *backends.front();
    threshold_ = settings.threshold >= 0.f
                     ? settings.threshold
                     : float(settings.lambda * std::sqrt(energy(first, kspace) / (double(s[0]) * s[1] * s[2])));

    L1SpiritSettings part = settings;
    part.threshold = threshold_;
    part.tolerance = 0.0;  // the whole volume's change decides (combine)
    const RArray host_mask = first.to_host(mask);
    if (plan.size() == 1) {
        Backend& be = *backends.front();
        const CArray g = coils::spirit_image_kernels(be, kernels, s[0], s[1], s[2]);
        parts_.push_back(Part{plan[0], backends.front(),
                              l1_spirit(backends.front(), be.to_device(kspace), host_mask, g, part)});
        return;
    }
    // Each slab's rows go straight from wherever the volume is to the slab's device (Backend::copy_rows:
    // a peer copy between GPUs), once the volume's own work has finished.
    first.synchronize();
    const size_t lines = kspace.size() / s[0];
    for (const Slab& slab : plan) {
        const std::shared_ptr<Backend>& b = backends[slab.backend];
        const CArray g = coils::spirit_image_kernels(*b, kernels, s[0], s[1], s[2], slab.first, slab.count);
        CArray k = b->empty(with_rows(s, slab.count));
        b->copy_rows(kspace, slab.first, s[0], k, 0, slab.count, slab.count, lines);
        RArray m = RArray::host(with_rows(host_mask.shape(), slab.count), b->budgets().host);
        mask_rows(host_mask, s[0], slab.first, slab.count, m);
        parts_.push_back(Part{slab, b, l1_spirit(b, k, m,
                                                 g.reshaped({slab.count, s[1], s[2], s[3], s[3]}), part)});
    }
    // The copies read the caller's volume, which it may free once this returns.
    for (const auto& b : backends) b->synchronize();
}

void L1SpiritSlabs::update() {
    // Every slab's iteration is queued before any slab waits for its previous change (Pocs::update
    // waits one iteration late), so the devices stay busy together.
    for (Part& p : parts_) p.solve.solver->update();
    ++iteration_;
    combine();
}

void L1SpiritSlabs::combine() const {
    size_t reported = parts_.front().solve.solver->changes().size();
    for (const Part& p : parts_) reported = std::min(reported, p.solve.solver->changes().size());
    while (residuals_.size() <= reported) {
        const size_t k = residuals_.size() - 1;
        double change = 0, size = 0;
        for (const Part& p : parts_) {
            change += p.solve.solver->changes()[k].change2;
            size += p.solve.solver->changes()[k].size2;
        }
        residuals_.push_back(size > 0 ? std::sqrt(change / size) : 0.0);
        if (tolerance_ > 0 && residuals_.back() <= tolerance_) converged_ = true;
    }
}

const std::vector<double>& L1SpiritSlabs::residuals() const {
    for (const Part& p : parts_) p.solve.solver->wait_all();
    combine();
    return residuals_;
}

CArray L1SpiritSlabs::images(Backend& be) const {
    if (parts_.size() == 1) return be.to_device(parts_.front().solve.images);
    const size_t ro = shape_[0], lines = shape_.size() / ro;
    CArray whole = be.empty(shape_);
    for (const Part& p : parts_) {
        p.backend->synchronize();  // its last iteration, before another backend reads the images
        be.copy_rows(p.solve.images, 0, p.slab.count, whole, p.slab.first, ro, p.slab.count, lines);
    }
    be.synchronize();  // the copies read other backends' arrays, which their streams may free and reuse
    return whole;
}

std::vector<Slab> L1SpiritSlabs::slabs() const {
    std::vector<Slab> s;
    for (const Part& p : parts_) s.push_back(p.slab);
    return s;
}

}  // namespace larmor
