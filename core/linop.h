#pragma once
// A linear operator A: C^ishape -> C^oshape with its adjoint, the unit that solvers (CG, POCS, FISTA)
// are written against. Every implementation has a test that <A x, y> = <x, A^H y> on random inputs.
#include "core/carray.h"

namespace larmor {

class LinearOperator {
public:
    virtual ~LinearOperator() = default;

    // Shape of the domain (input of forward) and of the range (output of forward).
    virtual const Shape& ishape() const = 0;
    virtual const Shape& oshape() const = 0;

    // y = A x: x has ishape(), y has oshape(); both already allocated on the operator's device.
    // Implementations say whether x and y may alias.
    virtual void forward(const CArray& x, CArray& y) = 0;
    // x = A^H y: y has oshape(), x has ishape().
    virtual void adjoint(const CArray& y, CArray& x) = 0;
};

}  // namespace larmor
