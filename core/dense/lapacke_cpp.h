#pragma once
// lapacke.h with std::complex as LAPACK's complex types, as lapack.h itself suggests for C++ (its
// default, C99's float _Complex, is a GCC extension in C++). Same layout (two floats / doubles), so
// the arrays of core/array.h pass straight through. Include this instead of <lapacke.h>.
#include <complex>

#ifndef lapack_complex_float
#define lapack_complex_float std::complex<float>
#endif
#ifndef lapack_complex_double
#define lapack_complex_double std::complex<double>
#endif

#include <lapacke.h>
