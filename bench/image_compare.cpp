// Compares the first image of two ISMRMRD HDF5 files (a group each, as gadgetron_ismrmrd_client and
// larmor-client write them: <group>/image_<series>), magnitude against magnitude:
//   image_compare A.h5 GROUP_A B.h5 GROUP_B
// prints both matrices and ||a x - b|| / ||b|| with the real a minimising it (the two servers scale
// their output differently: Gadgetron's chain multiplies by its scalingFactor before unsigned short).
// scripts/gadgetron-compare.sh runs it on Gadgetron 4.1's and Larmor's GRAPPA images of one scan.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <ismrmrd/dataset.h>
#include <ismrmrd/ismrmrd.h>

namespace {

// ISMRMRD prints every failed lookup; the series are probed one by one, so only the outcome is reported.
void quiet(const char*, int, const char*, int, const char*) {}

struct Pixels {
    std::vector<double> v;
    unsigned nx = 0, ny = 0;
    std::string name;
};

template <class T>
bool read_as(ISMRMRD::Dataset& d, const std::string& var, Pixels& out) {
    try {
        ISMRMRD::Image<T> im;
        d.readImage(var, 0, im);
        out.nx = im.getMatrixSizeX();
        out.ny = im.getMatrixSizeY();
        out.v.clear();
        for (size_t i = 0; i < im.getNumberOfDataElements(); ++i) out.v.push_back(std::abs(double(im.getDataPtr()[i])));
        out.name = var;
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

Pixels first_image(const std::string& file, const std::string& group) {
    ISMRMRD::Dataset d(file.c_str(), group.c_str(), false);
    Pixels p;
    for (int series = 0; series < 100; ++series) {
        const std::string var = "image_" + std::to_string(series);
        if (read_as<uint16_t>(d, var, p) || read_as<float>(d, var, p)) return p;
    }
    throw std::runtime_error(file + ": group " + group + " holds no unsigned-short or float image_<series>");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s A.h5 GROUP_A B.h5 GROUP_B\n", argv[0]);
        return 2;
    }
    ISMRMRD::ismrmrd_set_error_handler(quiet);
    try {
        const Pixels a = first_image(argv[1], argv[2]), b = first_image(argv[3], argv[4]);
        if (a.v.size() != b.v.size()) {
            std::fprintf(stderr, "image_compare: %ux%u against %ux%u\n", a.nx, a.ny, b.nx, b.ny);
            return 1;
        }
        double ab = 0, aa = 0, bb = 0;
        for (size_t i = 0; i < a.v.size(); ++i) ab += a.v[i] * b.v[i], aa += a.v[i] * a.v[i], bb += b.v[i] * b.v[i];
        const double s = aa > 0 ? ab / aa : 0;
        double e = 0;
        for (size_t i = 0; i < a.v.size(); ++i) e += (s * a.v[i] - b.v[i]) * (s * a.v[i] - b.v[i]);
        std::printf("%s %s/%s %ux%u, %s %s/%s %ux%u: scaled NRMSE %.4f (scale %.4g)\n", argv[1], argv[2], a.name.c_str(),
                    a.nx, a.ny, argv[3], argv[4], b.name.c_str(), b.nx, b.ny, std::sqrt(e / bb), s);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "image_compare: %s\n", e.what());
        return 1;
    }
}
