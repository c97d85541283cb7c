#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "image_output.h"

namespace larmor::client {
namespace {

// The server's name as a plain file name: its last path component, characters outside
// [A-Za-z0-9._-] replaced, never empty, ".", or "..".
std::string plain_name(const std::string& given) {
    std::string s = given.substr(given.find_last_of("/\\") == std::string::npos ? 0 : given.find_last_of("/\\") + 1);
    for (char& c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
    if (s.empty() || s == "." || s == "..") s = "image";
    if (s.size() < 4 || s.compare(s.size() - 4, 4, ".dcm") != 0) s += ".dcm";
    return s;
}

}  // namespace

DicomFileWriter::DicomFileWriter(std::string dir) : dir_(std::move(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) throw std::runtime_error("--dicom: cannot create directory '" + dir_ + "': " + ec.message());
}

std::string DicomFileWriter::write(const wire::DicomWithName& d) {
    const std::string name = plain_name(d.filename);
    const std::string stem = name.substr(0, name.size() - 4);
    std::string unique = name;
    for (int n = 1; used_.count(unique); ++n) unique = stem + "_" + std::to_string(n) + ".dcm";
    used_.insert(unique);
    const std::string path = (std::filesystem::path(dir_) / unique).string();
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(d.dicom.data()), std::streamsize(d.dicom.size()));
    if (!f) throw std::runtime_error("--dicom: cannot write '" + path + "'");
    return path;
}

}  // namespace larmor::client
