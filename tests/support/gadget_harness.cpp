#include "tests/support/gadget_harness.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <ismrmrd/dataset.h>

namespace larmor::test {

SessionContext make_session(const std::string& header_xml, std::shared_ptr<Backend> backend,
                            const std::string& session_id) {
    SessionContext ctx;
    ISMRMRD::deserialize(header_xml.c_str(), ctx.header);
    ctx.header_xml = header_xml;
    ctx.backend = std::move(backend);
    ctx.session_id = session_id;
    return ctx;
}

class GadgetHarness::Stage final : public Emitter {
public:
    Stage(GadgetHarness& h, size_t next) : h_(h), next_(next) {}
    void emit(Message msg) override { h_.deliver(next_, std::move(msg)); }

private:
    GadgetHarness& h_;
    size_t next_;
};

GadgetHarness::GadgetHarness(std::vector<std::unique_ptr<Gadget>> gadgets) : gadgets_(std::move(gadgets)) {
    for (size_t i = 0; i < gadgets_.size(); ++i) stages_.push_back(std::make_unique<Stage>(*this, i + 1));
}

GadgetHarness::~GadgetHarness() = default;

void GadgetHarness::start(const SessionContext& ctx) {
    ctx_ = ctx;
    for (auto& g : gadgets_) g->start(ctx_);
}

void GadgetHarness::deliver(size_t index, Message msg) {
    if (index >= gadgets_.size()) {
        output_.push_back(std::move(msg));
        return;
    }
    gadgets_[index]->process(std::move(msg), *stages_[index]);
}

void GadgetHarness::push(Message msg) { deliver(0, std::move(msg)); }

void GadgetHarness::finish() {
    for (size_t i = 0; i < gadgets_.size(); ++i) gadgets_[i]->finish(*stages_[i]);
}

std::vector<Message> run_chain(std::vector<std::unique_ptr<Gadget>> gadgets, const SessionContext& ctx,
                               const std::vector<Message>& input) {
    GadgetHarness h(std::move(gadgets));
    h.start(ctx);
    for (const Message& m : input) h.push(m);
    h.finish();
    return std::move(h.output());
}

namespace {

// A private copy of a file under the temp directory, removed with the object. ISMRMRD::Dataset opens even
// a file it only reads with H5F_ACC_RDWR (and creates the group when it is missing), which takes HDF5's
// exclusive file lock: two tests reading one shared dataset at once (ctest -j) then fail to open it, and
// the shared file would be written to. Reading a copy avoids both.
class PrivateCopy {
public:
    explicit PrivateCopy(const std::string& source) {
        std::string tmpl = (std::filesystem::temp_directory_path() / "larmor-test-dataset-XXXXXX.h5").string();
        const int fd = ::mkstemps(tmpl.data(), 3);
        if (fd < 0) throw std::runtime_error("cannot create a temporary copy of " + source);
        ::close(fd);
        path_ = tmpl;
        std::error_code ec;
        std::filesystem::copy_file(source, path_, std::filesystem::copy_options::overwrite_existing, ec);
        if (ec) {
            std::error_code ignored;
            std::filesystem::remove(path_, ignored);
            throw std::runtime_error("cannot copy " + source + " to " + path_ + ": " + ec.message());
        }
    }
    ~PrivateCopy() {
        std::error_code ec;
        std::filesystem::remove(path_, ec);
    }
    PrivateCopy(const PrivateCopy&) = delete;
    PrivateCopy& operator=(const PrivateCopy&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

}  // namespace

Dataset read_dataset(const std::string& path, const std::string& group) {
    const PrivateCopy copy(path);
    ISMRMRD::Dataset d(copy.path().c_str(), group.c_str(), false);
    Dataset out;
    d.readHeader(out.header_xml);
    const uint32_t n = d.getNumberOfAcquisitions();
    out.acquisitions.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
        ISMRMRD::Acquisition a;
        d.readAcquisition(i, a);
        Acquisition acq;
        acq.head = a.getHead();
        const size_t values = size_t(a.getHead().active_channels) * a.getHead().number_of_samples;
        acq.data.assign(a.getDataPtr(), a.getDataPtr() + values);
        const size_t traj = size_t(a.getHead().trajectory_dimensions) * a.getHead().number_of_samples;
        if (traj) acq.traj.assign(a.getTrajPtr(), a.getTrajPtr() + traj);
        out.acquisitions.push_back(std::move(acq));
    }
    return out;
}

}  // namespace larmor::test
