#include "receiver.h"

#include <unistd.h>

#include <iostream>
#include <system_error>

#include "connection.h"

namespace larmor::client {

Receiver::Receiver(const Options& opts)
    : opts_(opts), hdf5_(opts.out_file, opts.out_group), texts_(std::cerr, ::isatty(STDERR_FILENO) == 1) {
    if (!opts.png_dir.empty()) png_ = std::make_unique<PngImageWriter>(opts.png_dir);
    if (!opts.dicom_dir.empty()) dicom_ = std::make_unique<DicomFileWriter>(opts.dicom_dir);
}

void Receiver::handle(wire::WireMessage& msg, ReceiveResult& result) {
    if (auto* text = std::get_if<wire::Text>(&msg)) {
        const bool progress = texts_.show(text->text);
        if (!progress && text->text.find("ERROR") != std::string::npos) result.server_error = true;
        return;
    }
    texts_.end_status_line();  // whatever follows must not land on the progress line
    if (auto* im = std::get_if<wire::Image>(&msg)) {
        hdf5_.write(*im);
        if (png_) png_->write(*im);
        ++result.images;
    } else if (auto* resp = std::get_if<wire::Response>(&msg)) {
        std::cout << trimmed(resp->text) << std::endl;
        ++result.responses;
    } else if (auto* dep = std::get_if<wire::DependencyQuery>(&msg)) {
        if (!opts_.quiet)
            std::cerr << "larmor-client: note: dependency query answer (" << dep->meta_xml.size()
                      << " bytes of meta) ignored\n";
    } else if (auto* dicom = std::get_if<wire::DicomWithName>(&msg)) {
        ++result.dicom_files;
        if (dicom_) {
            dicom_->write(*dicom);
        } else if (!opts_.quiet && result.dicom_files == 1) {
            std::cerr << "larmor-client: note: the server sends DICOM files ('" << dicom->filename
                      << "'); give --dicom DIR to save them\n";
        }
    } else {
        throw wire::ProtocolError("unexpected " + wire::id_name(wire::message_id(msg)) + " from the server");
    }
}

ReceiveResult Receiver::run(wire::ByteReader& in, std::atomic<bool>& done) {
    ReceiveResult result;
    const wire::Limits limits;  // the defaults bound what a server may make us allocate
    try {
        for (;;) {
            wire::WireMessage msg = wire::read_message(in, limits);
            if (std::holds_alternative<wire::Close>(msg)) {
                result.closed = true;
                break;
            }
            handle(msg, result);
        }
    } catch (const wire::EndOfStream&) {
        result.error = "the server closed the connection without sending CLOSE";
    } catch (const wire::ProtocolError& e) {
        result.error = std::string("protocol error from the server: ") + e.what();
    } catch (const std::exception& e) {
        result.error = e.what();
    }
    texts_.end_status_line();
    done.store(true);
    return result;
}

}  // namespace larmor::client
