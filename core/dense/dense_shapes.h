#pragma once
// Argument checks of the dense layer (core/dense/dense.h), done once in the public functions before
// they dispatch to the CPU or CUDA implementation, so that both refuse the same calls with the same
// words. Every message names the operation, the argument and its shape.
#include <cstddef>
#include <initializer_list>
#include <string>

#include "core/backend.h"

namespace larmor::dense::detail {

// A batch of matrices [rows, cols, batch axes...] or vectors [length, batch axes...].
struct MatrixDims {
    size_t rows = 0, cols = 0, batch = 1;
};

// The matrix view of `s` (rank >= 2); throws naming `op`, `name` and the shape otherwise.
MatrixDims matrix_dims(const Shape& s, const char* op, const char* name);

// Shape of an output: its leading axes, then the batch axes of `like` (the input it follows).
Shape with_batch_of(std::initializer_list<size_t> lead, const Shape& like, int like_lead_axes);

// An input array: on the backend's device and allocated (unless it holds no elements).
template <class T>
void check_input(Backend& be, const Array<T>& a, const char* op, const char* name);

// An output: allocated on the backend with `want` when it has no storage, else checked to hold
// `lead_axes` leading axes equal to want's and `batch` matrices on the backend's device. `want`
// supplies the message's expectation.
template <class T>
void prepare_output(Backend& be, Array<T>& out, const Shape& want, int lead_axes, size_t batch, const char* op,
                    const char* name);

// No byte of `out` may be shared with `in` (unless allow_same_view and they are the very same view).
template <class A, class B>
void check_no_overlap(const Array<A>& out, const char* out_name, const Array<B>& in, const char* in_name,
                      const char* op, bool allow_same_view = false);

// The sizes handed to LAPACK and cuSOLVER are 32-bit: refuses a dimension above INT_MAX.
void check_int(size_t v, const char* what, const Shape& s, const char* op);

}  // namespace larmor::dense::detail
