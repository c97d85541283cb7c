#pragma once
// An iterative algorithm as a state machine, as SigPy's Alg: the caller runs the loop
//     while (!alg.done()) alg.update();
// so a gadget can report progress between iterations, stop on a deadline, and keep the residual
// history for the image's meta attributes. Workspaces are allocated when the algorithm is built;
// update() allocates nothing.
namespace larmor {

class Alg {
public:
    virtual ~Alg() = default;
    // One iteration.
    virtual void update() = 0;
    // True once the algorithm's own stopping rule holds (iteration count, tolerance).
    virtual bool done() const = 0;
    // Iterations run so far.
    virtual int iteration() const = 0;
};

// Runs alg to its own end; returns the iterations run.
inline int run(Alg& alg) {
    while (!alg.done()) alg.update();
    return alg.iteration();
}

}  // namespace larmor
