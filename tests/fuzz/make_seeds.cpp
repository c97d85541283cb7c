// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/), committed so that CI
// needs neither a server run nor the shared dataset to start fuzzing:
// - wire_session: client streams as larmor-client frames them (wire::encode), each played against a
//   real larmor-server, and the server's replies to them as recorded off the socket;
// - ismrmrd_header: headers of those sessions and, when given, the real Siemens dataset's header;
// - chain_config, gadgetron_xml: inline chains using every gadget and parameter (the fuzz run adds
//   the shipped config/ too).
// Usage: make_fuzz_seeds OUT_DIR [REAL_HEADER_XML]. Seeds stay a few KB: small matrices, few lines.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <complex>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/nhlbi_encoder.h"
#include "tests/support/server_process.h"
#include "wire/codec.h"

namespace {

using namespace larmor;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

constexpr uint16_t kSamples = 16, kChannels = 2, kLines = 8;

std::string header_xml(const std::string& extra = "") {
    return R"(<?xml version="1.0"?>
<ismrmrdHeader xmlns="http://www.ismrm.org/ISMRMRD">
 <measurementInformation><measurementID>seed_1</measurementID><patientPosition>HFS</patientPosition>)" +
           extra + R"(</measurementInformation>
 <acquisitionSystemInformation><receiverChannels>2</receiverChannels><relativeReceiverNoiseBandwidth>0.79</relativeReceiverNoiseBandwidth></acquisitionSystemInformation>
 <experimentalConditions><H1resonanceFrequency_Hz>63500000</H1resonanceFrequency_Hz></experimentalConditions>
 <encoding>
  <encodedSpace><matrixSize><x>16</x><y>8</y><z>1</z></matrixSize><fieldOfView_mm><x>200</x><y>100</y><z>5</z></fieldOfView_mm></encodedSpace>
  <reconSpace><matrixSize><x>8</x><y>8</y><z>1</z></matrixSize><fieldOfView_mm><x>100</x><y>100</y><z>5</z></fieldOfView_mm></reconSpace>
  <encodingLimits>
   <kspace_encoding_step_1><minimum>0</minimum><maximum>7</maximum><center>4</center></kspace_encoding_step_1>
   <slice><minimum>0</minimum><maximum>0</maximum><center>0</center></slice>
  </encodingLimits>
  <trajectory>cartesian</trajectory>
 </encoding>
</ismrmrdHeader>)";
}

wire::Acquisition acquisition(uint32_t scan, uint64_t flags = 0, uint16_t traj_dims = 0) {
    wire::Acquisition a;
    a.head.version = 1;
    a.head.flags = flags;
    a.head.scan_counter = scan;
    a.head.number_of_samples = kSamples;
    a.head.active_channels = kChannels;
    a.head.available_channels = kChannels;
    a.head.center_sample = kSamples / 2;
    a.head.sample_time_us = 5.0f;
    a.head.trajectory_dimensions = traj_dims;
    a.head.idx.kspace_encode_step_1 = static_cast<uint16_t>(scan % kLines);
    a.traj.assign(size_t{kSamples} * traj_dims, 0.25f);
    a.data.resize(size_t{kChannels} * kSamples);
    for (size_t i = 0; i < a.data.size(); ++i)
        a.data[i] = {float((scan * 7 + i * 3) % 11) - 5.0f, float((scan + i) % 5) - 2.0f};
    return a;
}

uint64_t flag(int n) { return uint64_t{1} << (n - 1); }

// A Cartesian scan: a noise readout, then kLines lines, the last flagged last-in-slice.
std::vector<wire::WireMessage> scan() {
    std::vector<wire::WireMessage> m{acquisition(0, flag(19))};
    for (uint32_t i = 1; i <= kLines; ++i) m.push_back(acquisition(i, i == kLines ? flag(8) : 0));
    return m;
}

// The acquisition as gadgetron_ismrmrd_client -P 8 sends it: flag 54, u32 n, the NHLBI buffer.
Bytes nhlbi_acquisition(const wire::Acquisition& a) {
    wire::Acquisition plain = a;
    const auto* f = reinterpret_cast<const float*>(a.data.data());
    const auto enc = test::nhlbi_encode_precision(std::vector<float>(f, f + 2 * a.data.size()), 8);
    plain.data.clear();
    plain.head.active_channels = 0;  // encode() then writes header and trajectory only
    Bytes out = wire::encode(plain);
    ISMRMRD::ISMRMRD_AcquisitionHeader h = a.head;
    h.flags |= flag(54);
    std::memcpy(out.data() + 2, &h, wire::kAcquisitionHeaderBytes);
    const uint32_t n = static_cast<uint32_t>(enc.bytes.size());
    const auto* np = reinterpret_cast<const uint8_t*>(&n);
    out.insert(out.end(), np, np + 4);
    out.insert(out.end(), enc.bytes.begin(), enc.bytes.end());
    return out;
}

Bytes encode_all(const std::vector<wire::WireMessage>& msgs) {
    Bytes out;
    for (const auto& m : msgs) {
        const Bytes b = wire::encode(m);
        out.insert(out.end(), b.begin(), b.end());
    }
    return out;
}

// Plays `stream` to the server on a fresh connection and returns every byte it answers until it
// closes the connection (the server replies after the client's CLOSE, so sending first is safe).
Bytes record_reply(uint16_t port, const Bytes& stream) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        throw std::runtime_error("cannot connect to larmor-server");
    for (size_t sent = 0; sent < stream.size();) {
        const ssize_t n = ::send(fd, stream.data() + sent, stream.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) throw std::runtime_error("send failed");
        sent += size_t(n);
    }
    Bytes reply;
    uint8_t buf[65536];
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 30000) <= 0) throw std::runtime_error("no reply within 30 s");
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        reply.insert(reply.end(), buf, buf + n);
    }
    ::close(fd);
    return reply;
}

void write(const fs::path& path, const Bytes& bytes) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    std::cout << path.string() << ": " << bytes.size() << " bytes\n";
}

void write(const fs::path& path, const std::string& text) { write(path, Bytes(text.begin(), text.end())); }

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

const char* kInlineChains[] = {
    "name: \"all\" backend: BACKEND_CPU\n"
    "gadget { name: \"n\" noise_adjust { noise_dwell_time_us: 5 receiver_noise_bandwidth: 0.79 pass_noise_scans: true } }\n"
    "gadget { remove_ro_oversampling {} }\n"
    "gadget { accumulate_trigger { trigger: TRIGGER_REPETITION emit_calibration: true keep_special_lines: true } }\n"
    "gadget { fft {} }\n"
    "gadget { coil_combine { method: COMBINE_WALSH kernel_size: 5 map_stride: 2 } }\n"
    "gadget { image_finish { output: OUTPUT_PHASE pixel_type: PIXEL_FLOAT } }\n",
    "gadget { acquisition_counter { pass_on: true } }\ngadget { pass_through {} }\n",
    "gadget { noise_adjust {} } gadget { accumulate_trigger { trigger: TRIGGER_SLICE emit_calibration: true } }\n"
    "gadget { cg_sense { solver { iterations: 10 tolerance: 1e-4 lambda: 0.02 progress_interval: -1 deadline_ms: 100 } "
    "nufft { tolerance: 1e-4 upsampling: 1.5 } map_kernel_size: 5 map_stride: 1 } }\n"
    "gadget { image_finish { output: OUTPUT_COMPLEX } }\n",
};

const char* kXmlChains[] = {
    R"(<?xml version="1.0" encoding="UTF-8"?>
<configuration><version>2</version>
 <readers><reader><dll>gadgetron_core_readers</dll><classname>AcquisitionReader</classname></reader></readers>
 <writers><writer><dll>gadgetron_core_writers</dll><classname>ImageWriter</classname></writer></writers>
 <stream>
  <gadget><name>Noise</name><dll>gadgetron_mricore</dll><classname>NoiseAdjustGadget</classname>
   <property name="noise_dwell_time_us_preset" value="5.0"/><property name="pass_noise_scans" value="false"/></gadget>
  <gadget><dll>gadgetron_mricore</dll><classname>RemoveROOversamplingGadget</classname></gadget>
  <gadget><classname>AcquisitionAccumulateTriggerGadget</classname><property name="trigger_dimension" value="repetition"/></gadget>
  <gadget><classname>BucketToBufferGadget</classname></gadget>
  <gadget><classname>SimpleReconGadget</classname></gadget>
  <gadget><classname>ImageArraySplitGadget</classname></gadget>
  <gadget><classname>ExtractGadget</classname><property name="extract_mask" value="8"/></gadget>
  <gadget><classname>ImageFinishGadget</classname></gadget>
 </stream>
</configuration>)",
    R"(<?xml version="1.0" encoding="UTF-8"?>
<gadgetronStreamConfiguration xsi:schemaLocation="http://gadgetron.sf.net/gadgetron gadgetron.xsd"
  xmlns="http://gadgetron.sf.net/gadgetron" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <reader><slot>1008</slot><dll>gadgetron_mricore</dll><classname>GadgetIsmrmrdAcquisitionMessageReader</classname></reader>
  <writer><slot>1022</slot><dll>gadgetron_mricore</dll><classname>MRIImageWriter</classname></writer>
  <gadget><name>Acc</name><dll>gadgetron_mricore</dll><classname>AccumulatorGadget</classname>
    <property><name>trigger_dimension</name><value>slice</value></property></gadget>
  <gadget><name>Prep</name><dll>gadgetron_gpuparallelmri</dll><classname>gpuBufferSensePrepGadget</classname></gadget>
  <gadget><name>CG</name><dll>gadgetron_gpuparallelmri</dll><classname>gpuCgSenseGadget</classname>
    <property><name>number_of_iterations</name><value>10</value></property>
    <property><name>cg_limit</name><value>1e-4</value></property>
    <property><name>kappa</name><value>0.01</value></property></gadget>
  <gadget><name>Extract</name><dll>gadgetron_mricore</dll><classname>ExtractGadget</classname>
    <property><name>extract_magnitude</name><value>true</value></property></gadget>
  <gadget><name>Counter</name><classname>AcquisitionCounter</classname></gadget>
</gadgetronStreamConfiguration>)",
};

// Gadgetron's noise dependency pre-query (protocol.md, "Session" 4).
const char* kNoiseSummary = R"(<?xml version="1.0" encoding="UTF-8"?>
<gadgetronStreamConfiguration xmlns="http://gadgetron.sf.net/gadgetron">
  <writer><slot>1019</slot><dll>gadgetron_mricore</dll><classname>DependencyQueryWriter</classname></writer>
  <gadget><name>NoiseSummary</name><dll>gadgetron_mricore</dll><classname>NoiseSummaryGadget</classname>
    <property><name>noise_file</name><value>/tmp/gadgetron/GadgetronNoiseCovarianceMatrix_seed_0</value></property>
  </gadget>
</gadgetronStreamConfiguration>)";

wire::Image image(uint16_t index) {
    wire::Image im;
    im.head.version = 1;
    im.head.data_type = ISMRMRD::ISMRMRD_FLOAT;
    im.head.image_type = ISMRMRD::ISMRMRD_IMTYPE_MAGNITUDE;
    im.head.matrix_size[0] = 4;
    im.head.matrix_size[1] = 4;
    im.head.matrix_size[2] = 1;
    im.head.channels = 1;
    im.head.image_index = index;
    im.meta = "<ismrmrdMeta><meta><name>Seed</name><value>1</value></meta></ismrmrdMeta>";
    im.pixels.assign(4 * 4 * sizeof(float), static_cast<uint8_t>(index));
    return im;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: make_fuzz_seeds OUT_DIR [REAL_HEADER_XML]\n";
        return 2;
    }
    const fs::path out(argv[1]);
    const std::string real_header = argc > 2 ? read_text(argv[2]) : std::string();
    try {
        test::ServerProcess server;
        auto session = [&](const std::string& name, const Bytes& stream) {
            write(out / "wire_session" / ("client_" + name), stream);
            write(out / "wire_session" / ("server_" + name), record_reply(server.port(), stream));
        };
        const std::vector<wire::WireMessage> data = scan();
        Bytes s = encode_all({wire::ConfigFile{"cartesian-rss"}, wire::ParameterScript{header_xml()}});
        const Bytes body = encode_all(data), close = wire::encode(wire::Close{});
        Bytes cart = s;
        cart.insert(cart.end(), body.begin(), body.end());
        cart.insert(cart.end(), close.begin(), close.end());
        session("cartesian", cart);

        Bytes nhlbi = encode_all({wire::Query{0, 7, "gadgetron::version"}, wire::ConfigFile{"default.xml"},
                                  wire::ParameterScript{header_xml()}});
        for (uint32_t i = 0; i < 3; ++i) {
            const Bytes a = nhlbi_acquisition(acquisition(i + 1, i == 2 ? flag(8) : 0, i == 1 ? 2 : 0));
            nhlbi.insert(nhlbi.end(), a.begin(), a.end());
        }
        nhlbi.insert(nhlbi.end(), close.begin(), close.end());
        session("nhlbi", nhlbi);

        wire::Waveform w;
        w.head.version = 1;
        w.head.channels = 1;
        w.head.number_of_samples = 4;
        w.data = {1, 2, 3, 4};
        session("counter", encode_all({wire::ConfigScript{kInlineChains[1]}, wire::ParameterScript{header_xml()},
                                       acquisition(1), w, wire::Query{0, 9, "larmor::status"}, wire::Close{}}));
        session("images", encode_all({wire::ConfigScript{"gadget { pass_through {} }"},
                                      wire::ParameterScript{header_xml()}, image(0), image(1), wire::Close{}}));
        session("dependency_query", encode_all({wire::ConfigScript{kNoiseSummary}, wire::Close{}}));
        session("bad_chain", encode_all({wire::ConfigFile{"no_such_chain"}, wire::ParameterScript{header_xml()},
                                         acquisition(1), wire::Close{}}));
        if (!real_header.empty())
            session("real_header", encode_all({wire::ConfigFile{"counter"}, wire::ParameterScript{real_header},
                                               acquisition(1, flag(19)), wire::Close{}}));
    } catch (const std::exception& e) {
        std::cerr << "make_fuzz_seeds: " << e.what() << "\n";
        return 1;
    }
    write(out / "ismrmrd_header" / "small.xml", header_xml());
    write(out / "ismrmrd_header" / "noise_dependency.xml",
          header_xml("<measurementDependency><dependencyType>Noise</dependencyType><measurementID>seed_0</measurementID>"
                     "</measurementDependency>"));
    if (!real_header.empty()) write(out / "ismrmrd_header" / "siemens_grappa_r3.xml", real_header);
    for (size_t i = 0; i < std::size(kInlineChains); ++i)
        write(out / "chain_config" / ("inline_" + std::to_string(i) + ".pbtxt"), std::string(kInlineChains[i]));
    for (size_t i = 0; i < std::size(kXmlChains); ++i)
        write(out / "gadgetron_xml" / ("inline_" + std::to_string(i) + ".xml"), std::string(kXmlChains[i]));
    write(out / "gadgetron_xml" / "noise_summary.xml", std::string(kNoiseSummary));
    return 0;
}
