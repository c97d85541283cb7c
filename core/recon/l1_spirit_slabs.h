#pragma once
// l1-SPIRiT (core/recon/l1_spirit.h) on a 3D Cartesian scan cut into slabs of readout positions, each
// slab on its own backend. Once the readout is inverse-transformed the (E1, E2) slices are independent
// problems (Murphy et al., IEEE TMI 31:1250, 2012, Section III.A), so the volume is split along the
// readout and the slabs are solved on as many devices as there are (their Section IV ran four GPUs).
// Each device builds only its own slab's image-space G (spirit_image_kernels' slab form).
//
// The slabs iterate in lockstep: one update() queues one POCS iteration on every slab's backend, so the
// devices run at once (each backend has its own stream), and the stopping rule reads the change of the
// whole volume, summed over the slabs, one iteration late as POCS itself does. The threshold is the
// whole volume's too. So the result does not depend on how the volume was split or over how many
// devices: the same images, to float rounding, as one backend solving the volume.
#include <memory>
#include <vector>

#include "core/coils/spirit.h"
#include "core/iter/alg.h"
#include "core/recon/l1_spirit.h"

namespace larmor {

struct Slab {
    size_t first = 0, count = 0;  // readout positions [first, first + count)
    size_t backend = 0;           // index into the backends
};

// The slabs of `ro` readout positions over `backends` backends: slices_per_slab == 0 cuts one slab per
// backend (sizes differing by at most one, so the devices finish together); otherwise slabs of
// slices_per_slab positions (the last may be shorter) are dealt to the backends in turn. Throws
// std::invalid_argument for no backends or ro == 0.
std::vector<Slab> plan_slabs(size_t ro, size_t backends, size_t slices_per_slab = 0);

class L1SpiritSlabs final : public Alg {
public:
    // kspace [RO, E1, E2 > 1, C] with the readout in image space, on the host or on backends[0]; mask
    // [RO, E1, E2] 0/1 on the host; kernels: 3D SPIRiT kernels (coils::spirit_kernels_3d). Every slab's
    // images, data and G live on its backend. Throws std::invalid_argument naming what does not fit.
    L1SpiritSlabs(const std::vector<std::shared_ptr<Backend>>& backends, const CArray& kspace, const RArray& mask,
                  const coils::SpiritKernels& kernels, const L1SpiritSettings& settings, size_t slices_per_slab = 0);

    void update() override;
    bool done() const override { return iteration_ >= iterations_ || converged_; }
    int iteration() const override { return iteration_; }

    // ||x_k - x_{k-1}|| / ||x_k|| of the whole volume per iteration (entry 0 is 1: the start); waits for
    // the last iteration.
    const std::vector<double>& residuals() const;
    // The coil images [RO, E1, E2, C], the slabs gathered in order onto `be` (one slab on `be`: its
    // images themselves, no copy).
    CArray images(Backend& be) const;
    float threshold() const { return threshold_; }
    std::vector<Slab> slabs() const;

private:
    struct Part {
        Slab slab;
        std::shared_ptr<Backend> backend;
        L1Spirit solve;
    };
    std::vector<Part> parts_;
    Shape shape_;
    int iterations_;
    double tolerance_;
    float threshold_ = 0.f;
    int iteration_ = 0;
    mutable std::vector<double> residuals_{1.0};
    mutable bool converged_ = false;
    // Appends the whole volume's change for every iteration all slabs have reported.
    void combine() const;
};

}  // namespace larmor
