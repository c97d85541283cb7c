#include "core/linops/algebra.h"

#include <stdexcept>
#include <utility>

namespace larmor {
namespace {

void same_backend(const LinearOperator& a, const LinearOperator& b, const char* what) {
    if (&a.backend() != &b.backend())
        throw std::invalid_argument(std::string(what) + ": " + a.describe() + " and " + b.describe() +
                                    " run on different backends (" + a.backend().describe() + ", " +
                                    b.backend().describe() + ")");
}

class Identity final : public LinearOperator {
public:
    Identity(std::shared_ptr<Backend> be, const Shape& s) : LinearOperator(std::move(be), s, s, "identity") {}

protected:
    void apply_forward(const CArray& x, CArray& y) override { backend().copy(x, y); }
    void apply_adjoint(const CArray& y, CArray& x) override { backend().copy(y, x); }
    void apply_normal(const CArray& x, CArray& z) override { backend().copy(x, z); }
};

class Compose final : public LinearOperator {
public:
    Compose(LinOp a, LinOp b)
        : LinearOperator(b->backend_ptr(), b->ishape(), a->oshape(), "compose(" + a->name() + ", " + b->name() + ")"),
          a_(std::move(a)), b_(std::move(b)) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override {
        CArray& t = scratch(0, b_->oshape());
        b_->forward(x, t);
        a_->forward(t, y);
    }
    void apply_adjoint(const CArray& y, CArray& x) override {
        CArray& t = scratch(0, b_->oshape());
        a_->adjoint(y, t);
        b_->adjoint(t, x);
    }
    void apply_normal(const CArray& x, CArray& z) override {
        CArray& t = scratch(0, b_->oshape());
        CArray& u = scratch(1, b_->oshape());
        b_->forward(x, t);
        a_->normal(t, u);
        b_->adjoint(u, z);
    }

private:
    LinOp a_, b_;
};

class Sum final : public LinearOperator {
public:
    Sum(LinOp a, LinOp b)
        : LinearOperator(a->backend_ptr(), a->ishape(), a->oshape(), "sum(" + a->name() + ", " + b->name() + ")"),
          a_(std::move(a)), b_(std::move(b)) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override {
        CArray& t = scratch(0, oshape());
        a_->forward(x, y);
        b_->forward(x, t);
        backend().axpy(1.f, t, y);
    }
    void apply_adjoint(const CArray& y, CArray& x) override {
        CArray& t = scratch(1, ishape());
        a_->adjoint(y, x);
        b_->adjoint(y, t);
        backend().axpy(1.f, t, x);
    }

private:
    LinOp a_, b_;
};

class Scaled final : public LinearOperator {
public:
    Scaled(cfloat a, LinOp op)
        : LinearOperator(op->backend_ptr(), op->ishape(), op->oshape(), "scale(" + op->name() + ")"),
          a_(a), op_(std::move(op)) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override {
        op_->forward(x, y);
        backend().scale(a_, y, y);
    }
    void apply_adjoint(const CArray& y, CArray& x) override {
        op_->adjoint(y, x);
        backend().scale(std::conj(a_), x, x);
    }
    void apply_normal(const CArray& x, CArray& z) override {
        op_->normal(x, z);
        backend().scale(std::norm(a_), z, z);
    }

private:
    cfloat a_;
    LinOp op_;
};

std::string names(const std::vector<LinOp>& ops) {
    std::string s;
    for (const LinOp& o : ops) s += (s.empty() ? "" : ", ") + o->name();
    return s;
}

// The sizes of a list of shapes laid one after another, and their offsets.
struct Layout {
    std::vector<size_t> offset;
    size_t total = 0;
};
template <class ShapeOf>
Layout layout(const std::vector<LinOp>& ops, ShapeOf shape_of) {
    Layout l;
    for (const LinOp& o : ops) {
        l.offset.push_back(l.total);
        l.total += shape_of(*o).size();
    }
    return l;
}

class VStack final : public LinearOperator {
public:
    VStack(std::vector<LinOp> ops, const Layout& l)
        : LinearOperator(ops.front()->backend_ptr(), ops.front()->ishape(), Shape{l.total}, "vstack(" + names(ops) + ")"),
          ops_(std::move(ops)), offset_(l.offset) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override {
        for (size_t i = 0; i < ops_.size(); ++i) {
            CArray yi = y.view(offset_[i], ops_[i]->oshape());
            ops_[i]->forward(x, yi);
        }
    }
    void apply_adjoint(const CArray& y, CArray& x) override {
        CArray& t = scratch(0, ishape());
        for (size_t i = 0; i < ops_.size(); ++i) {
            const CArray yi = y.view(offset_[i], ops_[i]->oshape());
            ops_[i]->adjoint(yi, i == 0 ? x : t);
            if (i > 0) backend().axpy(1.f, t, x);
        }
    }
    void apply_normal(const CArray& x, CArray& z) override {
        CArray& t = scratch(0, ishape());
        for (size_t i = 0; i < ops_.size(); ++i) {
            ops_[i]->normal(x, i == 0 ? z : t);
            if (i > 0) backend().axpy(1.f, t, z);
        }
    }

private:
    std::vector<LinOp> ops_;
    std::vector<size_t> offset_;
};

class HStack final : public LinearOperator {
public:
    HStack(std::vector<LinOp> ops, const Layout& l)
        : LinearOperator(ops.front()->backend_ptr(), Shape{l.total}, ops.front()->oshape(), "hstack(" + names(ops) + ")"),
          ops_(std::move(ops)), offset_(l.offset) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override {
        CArray& t = scratch(0, oshape());
        for (size_t i = 0; i < ops_.size(); ++i) {
            const CArray xi = x.view(offset_[i], ops_[i]->ishape());
            ops_[i]->forward(xi, i == 0 ? y : t);
            if (i > 0) backend().axpy(1.f, t, y);
        }
    }
    void apply_adjoint(const CArray& y, CArray& x) override {
        for (size_t i = 0; i < ops_.size(); ++i) {
            CArray xi = x.view(offset_[i], ops_[i]->ishape());
            ops_[i]->adjoint(y, xi);
        }
    }

private:
    std::vector<LinOp> ops_;
    std::vector<size_t> offset_;
};

// A^H. Its normal is A A^H, which no override of A's normal() computes, so it is the pair of A's
// forward after A's adjoint (as the default would, spelt out because the order is the point).
class Adjoint final : public LinearOperator {
public:
    explicit Adjoint(LinOp a)
        : LinearOperator(a->backend_ptr(), a->oshape(), a->ishape(), "adjoint(" + a->name() + ")"), a_(std::move(a)) {}
    const LinOp& inner() const { return a_; }

protected:
    void apply_forward(const CArray& x, CArray& y) override { a_->adjoint(x, y); }
    void apply_adjoint(const CArray& y, CArray& x) override { a_->forward(y, x); }
    void apply_normal(const CArray& x, CArray& z) override {
        CArray& t = scratch(0, a_->ishape());
        a_->adjoint(x, t);
        a_->forward(t, z);
    }

private:
    LinOp a_;
};

// A^H A, Hermitian: forward and adjoint are both A's normal().
class Normal final : public LinearOperator {
public:
    explicit Normal(LinOp a)
        : LinearOperator(a->backend_ptr(), a->ishape(), a->ishape(), "normal(" + a->name() + ")"), a_(std::move(a)) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override { a_->normal(x, y); }
    void apply_adjoint(const CArray& y, CArray& x) override { a_->normal(y, x); }
    void apply_normal(const CArray& x, CArray& z) override {
        CArray& t = scratch(0, ishape());
        a_->normal(x, t);
        a_->normal(t, z);
    }

private:
    LinOp a_;
};

// The identity between two shapes of one size. The input is seen with the output's shape (a view, no
// copy), so the one copy goes straight into the caller's array.
class Reshape final : public LinearOperator {
public:
    Reshape(std::shared_ptr<Backend> be, const Shape& ishape, const Shape& oshape)
        : LinearOperator(std::move(be), ishape, oshape, "reshape") {}

protected:
    void apply_forward(const CArray& x, CArray& y) override { backend().copy(x.reshaped(oshape()), y); }
    void apply_adjoint(const CArray& y, CArray& x) override { backend().copy(y.reshaped(ishape()), x); }
    void apply_normal(const CArray& x, CArray& z) override { backend().copy(x, z); }
};

// A on views of the caller's arrays with A's own shapes: no copy and no temporary; A writes straight
// into the caller's output (a view shares its storage).
class Reshaped final : public LinearOperator {
public:
    Reshaped(LinOp a, const Shape& ishape, const Shape& oshape)
        : LinearOperator(a->backend_ptr(), ishape, oshape, "reshape(" + a->name() + ")"), a_(std::move(a)) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override {
        CArray yv = y.reshaped(a_->oshape());
        a_->forward(x.reshaped(a_->ishape()), yv);
    }
    void apply_adjoint(const CArray& y, CArray& x) override {
        CArray xv = x.reshaped(a_->ishape());
        a_->adjoint(y.reshaped(a_->oshape()), xv);
    }
    void apply_normal(const CArray& x, CArray& z) override {
        CArray zv = z.reshaped(a_->ishape());
        a_->normal(x.reshaped(a_->ishape()), zv);
    }

private:
    LinOp a_;
};

// A, except that normal() is N's forward. Compositions reach A's normal() only through normal() (see
// Compose), so N replaces A^H A everywhere A sits at the left end of a product.
class WithNormal final : public LinearOperator {
public:
    WithNormal(LinOp a, LinOp n)
        : LinearOperator(a->backend_ptr(), a->ishape(), a->oshape(), "with_normal(" + a->name() + ", " + n->name() + ")"),
          a_(std::move(a)), n_(std::move(n)) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override { a_->forward(x, y); }
    void apply_adjoint(const CArray& y, CArray& x) override { a_->adjoint(y, x); }
    void apply_normal(const CArray& x, CArray& z) override { n_->forward(x, z); }

private:
    LinOp a_, n_;
};

void check_list(const std::vector<LinOp>& ops, const char* what) {
    if (ops.empty()) throw std::invalid_argument(std::string(what) + ": no operators");
    for (const LinOp& o : ops) {
        if (!o) throw std::invalid_argument(std::string(what) + ": null operator");
        same_backend(*ops.front(), *o, what);
    }
}

}  // namespace

LinOp identity(std::shared_ptr<Backend> backend, const Shape& shape) {
    return std::make_shared<Identity>(std::move(backend), shape);
}

LinOp compose(LinOp a, LinOp b) {
    if (!a || !b) throw std::invalid_argument("compose: null operator");
    same_backend(*a, *b, "compose");
    if (b->oshape() != a->ishape())
        throw std::invalid_argument("compose: " + b->describe() + " feeds " + a->describe() + ", but " +
                                    b->oshape().str() + " != " + a->ishape().str());
    return std::make_shared<Compose>(std::move(a), std::move(b));
}

LinOp compose(const std::vector<LinOp>& ops) {
    check_list(ops, "compose");
    LinOp c = ops.back();
    for (size_t i = ops.size() - 1; i-- > 0;) c = compose(ops[i], c);
    return c;
}

LinOp sum(LinOp a, LinOp b) {
    if (!a || !b) throw std::invalid_argument("sum: null operator");
    same_backend(*a, *b, "sum");
    if (a->ishape() != b->ishape() || a->oshape() != b->oshape())
        throw std::invalid_argument("sum: " + a->describe() + " and " + b->describe() + " differ in shape");
    return std::make_shared<Sum>(std::move(a), std::move(b));
}

LinOp scale(cfloat a, LinOp op) {
    if (!op) throw std::invalid_argument("scale: null operator");
    return std::make_shared<Scaled>(a, std::move(op));
}

LinOp vstack(const std::vector<LinOp>& ops) {
    check_list(ops, "vstack");
    for (const LinOp& o : ops)
        if (o->ishape() != ops.front()->ishape())
            throw std::invalid_argument("vstack: " + o->describe() + " does not take the input " +
                                        ops.front()->ishape().str() + " of " + ops.front()->describe());
    return std::make_shared<VStack>(ops, layout(ops, [](const LinearOperator& o) { return o.oshape(); }));
}

LinOp hstack(const std::vector<LinOp>& ops) {
    check_list(ops, "hstack");
    for (const LinOp& o : ops)
        if (o->oshape() != ops.front()->oshape())
            throw std::invalid_argument("hstack: " + o->describe() + " does not give the output " +
                                        ops.front()->oshape().str() + " of " + ops.front()->describe());
    return std::make_shared<HStack>(ops, layout(ops, [](const LinearOperator& o) { return o.ishape(); }));
}

LinOp adjoint(LinOp a) {
    if (!a) throw std::invalid_argument("adjoint: null operator");
    if (const auto* h = dynamic_cast<const Adjoint*>(a.get())) return h->inner();
    return std::make_shared<Adjoint>(std::move(a));
}

LinOp normal(LinOp a) {
    if (!a) throw std::invalid_argument("normal: null operator");
    return std::make_shared<Normal>(std::move(a));
}

LinOp reshape(std::shared_ptr<Backend> backend, const Shape& ishape, const Shape& oshape) {
    if (ishape.size() != oshape.size())
        throw std::invalid_argument("reshape: " + ishape.str() + " and " + oshape.str() + " differ in size (" +
                                    std::to_string(ishape.size()) + " != " + std::to_string(oshape.size()) + ")");
    return std::make_shared<Reshape>(std::move(backend), ishape, oshape);
}

LinOp reshape(LinOp a, const Shape& ishape, const Shape& oshape) {
    if (!a) throw std::invalid_argument("reshape: null operator");
    if (ishape.size() != a->ishape().size())
        throw std::invalid_argument("reshape: input " + ishape.str() + " of " + std::to_string(ishape.size()) +
                                    " elements for " + a->describe() + ", whose input " + a->ishape().str() + " has " +
                                    std::to_string(a->ishape().size()));
    if (oshape.size() != a->oshape().size())
        throw std::invalid_argument("reshape: output " + oshape.str() + " of " + std::to_string(oshape.size()) +
                                    " elements for " + a->describe() + ", whose output " + a->oshape().str() + " has " +
                                    std::to_string(a->oshape().size()));
    return std::make_shared<Reshaped>(std::move(a), ishape, oshape);
}

LinOp with_normal(LinOp a, LinOp n) {
    if (!a || !n) throw std::invalid_argument("with_normal: null operator");
    same_backend(*a, *n, "with_normal");
    if (n->ishape() != a->ishape() || n->oshape() != a->ishape())
        throw std::invalid_argument("with_normal: " + n->describe() + " is not square on the input " +
                                    a->ishape().str() + " of " + a->describe());
    return std::make_shared<WithNormal>(std::move(a), std::move(n));
}

}  // namespace larmor
