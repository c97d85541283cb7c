// DicomFinish (Gadgetron's DicomFinishGadget): each ISMRMRD image becomes DICOM MR Image Storage files
// (gadgets/dicom/dicom_image.h) sent to the client as DICOM_WITHNAME (1018) with the image's meta XML;
// one DICOM series per ISMRMRD image series index, its UIDs made when its first image arrives.
#include <map>
#include <string>

#include <spdlog/spdlog.h>

#include "gadgets/chain_config.h"
#include "gadgets/dicom/dicom_image.h"
#include "gadgets/factories.h"
#include "gadgets/typed_gadget.h"

namespace larmor {
namespace {

class DicomFinishGadget final : public TypedGadget<Image> {
public:
    explicit DicomFinishGadget(const config::DicomFinish& cfg) : cfg_(cfg) {
        if (const std::string why = dicom::dicom_unavailable_reason(); !why.empty())
            throw ConfigError("DicomFinish: " + why);
        const std::string& root = cfg.uid_root();
        if (root.size() > 40 || root.find_first_not_of("0123456789.") != std::string::npos ||
            (!root.empty() && (root.front() == '.' || root.back() == '.')))
            throw ConfigError("DicomFinish: uid_root '" + root +
                              "' is not a UID root (digits and dots, at most 40 characters)");
    }

    void start(const SessionContext& ctx) override {
        header_ = ctx.header;
        session_ = ctx.session_id;
    }

    void process(Image& im, Emitter& out) override {
        const uint16_t index = im.head.image_series_index;
        auto it = series_.find(index);
        if (it == series_.end())
            it = series_.emplace(index, Series{dicom::series_identity(header_, index, cfg_.uid_root(),
                                                                       cfg_.series_description()),
                                               1})
                     .first;
        std::vector<dicom::DicomFile> files;
        try {
            files = dicom::dicom_files(im, header_, it->second.identity, it->second.next_instance, cfg_.uid_root());
        } catch (const std::invalid_argument& e) {
            throw std::runtime_error(std::string("DicomFinish: image ") + std::to_string(im.head.image_index) +
                                     " of series " + std::to_string(index) + ": " + e.what());
        }
        it->second.next_instance += long(files.size());
        spdlog::debug("[{}] DicomFinish: image {} -> {} DICOM file(s) of series {}", session_, im.head.image_index,
                      files.size(), it->second.identity.series_number);
        for (dicom::DicomFile& f : files)
            out.emit(wire::DicomWithName{std::move(f.bytes), std::move(f.filename), im.meta});
        if (cfg_.keep_images()) out.emit(std::move(im));
    }

private:
    struct Series {
        dicom::SeriesIdentity identity;
        long next_instance;
    };
    config::DicomFinish cfg_;
    ISMRMRD::IsmrmrdHeader header_;
    std::string session_;
    std::map<uint16_t, Series> series_;
};

}  // namespace

std::unique_ptr<Gadget> make_dicom_finish(const config::DicomFinish& cfg) {
    return std::make_unique<DicomFinishGadget>(cfg);
}

}  // namespace larmor
