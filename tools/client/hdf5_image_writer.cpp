#include <mutex>
#include <stdexcept>

#include <ismrmrd/dataset.h>

#include "hdf5_guard.h"
#include "image_output.h"

namespace larmor::client {

Hdf5ImageWriter::Hdf5ImageWriter(std::string file, std::string group)
    : file_(std::move(file)), group_(std::move(group)) {}

Hdf5ImageWriter::~Hdf5ImageWriter() {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    dataset_.reset();
}

void Hdf5ImageWriter::write(const wire::Image& im) {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    try {
        if (!dataset_) dataset_ = open_dataset(file_, group_, true);
        // A view of our buffers in the C struct ISMRMRD writes from; appendImage only reads through it.
        static char empty_meta[1] = {0};
        ISMRMRD::ISMRMRD_Image view{};
        view.head = im.head;
        view.head.attribute_string_len = static_cast<uint32_t>(im.meta.size());
        view.attribute_string = im.meta.empty() ? empty_meta : const_cast<char*>(im.meta.data());
        view.data = const_cast<uint8_t*>(im.pixels.data());
        dataset_->appendImage("image_" + std::to_string(im.head.image_series_index), &view);
    } catch (const std::exception& e) {
        throw std::runtime_error("cannot write image to '" + file_ + "' group '" + group_ + "': " +
                                 first_line(e.what()));
    }
}

}  // namespace larmor::client
