#include "sender.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "wire/codec.h"

namespace larmor::client {

namespace {

wire::WireMessage config_message(const Options& opts) {
    if (opts.config_local.empty()) return wire::ConfigFile{opts.config};
    std::ifstream f(opts.config_local, std::ios::binary);
    std::ostringstream text;
    text << f.rdbuf();
    if (!f) throw std::runtime_error("cannot read the local config '" + opts.config_local + "'");
    return wire::ConfigScript{text.str()};
}

}  // namespace

void send_dataset(SocketWriter& out, InputFile& in, const Options& opts, const std::atomic<bool>& stop,
                  SendStats& stats) {
    wire::write_message(out, config_message(opts));
    wire::write_message(out, wire::ParameterScript{in.header_xml()});
    out.flush();  // let the server build its chain while we read the file

    // Images first: a chain that uses them (an anatomical prior) has them before the data it reconstructs.
    wire::WireMessage image_msg{wire::Image{}};
    for (const std::string& var : opts.send_images) {
        const uint32_t n = in.images(var);
        for (uint32_t i = 0; i < n; ++i) {
            if (stop.load()) return;
            in.read_image(var, i, std::get<wire::Image>(image_msg));
            wire::write_message(out, image_msg);
            ++stats.images;
        }
    }

    // One message of each kind, refilled in place, so their buffers are allocated once.
    wire::WireMessage acq_msg{wire::Acquisition{}};
    wire::WireMessage wav_msg{wire::Waveform{}};
    auto& acq = std::get<wire::Acquisition>(acq_msg);
    auto& wav = std::get<wire::Waveform>(wav_msg);

    // Waveforms (ECG, respiration) go out before the first acquisition that is not older than them,
    // as they were recorded; the rest after the last acquisition.
    uint32_t next_wav = 0;
    bool wav_loaded = false;
    auto send_waveforms_before = [&](uint64_t time_stamp) {
        while (next_wav < in.waveforms()) {
            if (!wav_loaded) {
                in.read_waveform(next_wav, wav);
                wav_loaded = true;
            }
            if (wav.head.time_stamp > time_stamp) return;
            wire::write_message(out, wav_msg);
            ++stats.waveforms;
            ++next_wav;
            wav_loaded = false;
        }
    };

    for (uint32_t i = 0; i < in.acquisitions(); ++i) {
        if (stop.load()) return;
        in.read_acquisition(i, acq);
        send_waveforms_before(acq.head.acquisition_time_stamp);
        wire::write_message(out, acq_msg);
        ++stats.acquisitions;
    }
    send_waveforms_before(UINT64_MAX);
    if (stop.load()) return;
    wire::write_message(out, wire::Close{});
    out.flush();
    stats.complete = true;
}

void send_query(SocketWriter& out, const std::string& key) {
    wire::write_message(out, wire::Query{0, 1, key});
    wire::write_message(out, wire::Close{});
    out.flush();
}

}  // namespace larmor::client
