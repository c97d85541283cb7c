#pragma once
// N-d shape of an array, x (readout) fastest: the ISMRMRD memory order (design.md, Conventions).
#include <array>
#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace larmor {

class Shape {
public:
    static constexpr int kMaxRank = 8;

    Shape() = default;
    Shape(std::initializer_list<size_t> dims) {
        if (dims.size() > kMaxRank) throw std::invalid_argument("Shape: rank " + std::to_string(dims.size()) + " exceeds 8");
        for (size_t d : dims) dims_[rank_++] = d;
    }

    int rank() const { return rank_; }
    size_t operator[](int axis) const { return dims_.at(static_cast<size_t>(axis)); }
    size_t& operator[](int axis) { return dims_.at(static_cast<size_t>(axis)); }

    // Product of all extents (1 for rank 0).
    size_t size() const {
        size_t n = 1;
        for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
        return n;
    }
    // Distance in elements between neighbours along `axis`.
    size_t stride(int axis) const {
        size_t s = 1;
        for (int i = 0; i < axis; ++i) s *= dims_[static_cast<size_t>(i)];
        return s;
    }
    void push_back(size_t d) {
        if (rank_ == kMaxRank) throw std::invalid_argument("Shape: rank exceeds 8");
        dims_[static_cast<size_t>(rank_++)] = d;
    }

    bool operator==(const Shape& o) const {
        if (rank_ != o.rank_) return false;
        for (int i = 0; i < rank_; ++i)
            if (dims_[static_cast<size_t>(i)] != o.dims_[static_cast<size_t>(i)]) return false;
        return true;
    }
    bool operator!=(const Shape& o) const { return !(*this == o); }

    std::string str() const {
        std::string s = "[";
        for (int i = 0; i < rank_; ++i) s += (i ? "x" : "") + std::to_string(dims_[static_cast<size_t>(i)]);
        return s + "]";
    }

private:
    std::array<size_t, kMaxRank> dims_{};
    int rank_ = 0;
};

}  // namespace larmor
