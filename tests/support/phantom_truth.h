#pragma once
// What a reconstruction of a larmor-phantom dataset is compared with: the object as a root-sum-of-
// squares coil combination sees it, the magnitude pixels of a returned image, and the relative error
// after the best real scale (the image units are not what these comparisons test).
#include <string>
#include <vector>

#include "gadgets/message.h"
#include "tests/support/gadget_harness.h"
#include "tools/phantom/phantom.h"

namespace larmor::test {

// rho |s| at the pixel centres of the reconstruction grid (x fastest; the volume in 3D), each pixel
// averaged over supersample^dims sub-points. whitened: rho sqrt(s^H Psi^-1 s) with the phantom's noise
// covariance Psi, what RSS gives after noise prewhitening (any square root W of Psi^-1: |W s|^2 is
// s^H Psi^-1 s).
std::vector<double> rss_object(const phantom::PhantomSpec& spec, int supersample = 1, bool whitened = false);

// The float pixels of a magnitude image (data type float, checked).
std::vector<double> float_pixels(const Image& img);

// ||a x - t|| / ||t|| with the real a minimising it.
double scaled_nrmse(const std::vector<double>& x, const std::vector<double>& t);

// The dataset of a spec as a client would send it: written by larmor-phantom's writer to a private
// temporary file (the process id and `tag` in its name, so tests running at once never share one) and
// read back.
Dataset phantom_dataset(const phantom::PhantomSpec& spec, const std::string& tag);

}  // namespace larmor::test
