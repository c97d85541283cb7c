// larmor-client end to end against a scripted fake server: what it sends (order, bytes), what it stores
// (HDF5 laid out like Gadgetron's client, PNGs), and that every broken session ends with a non-zero
// exit instead of a hang.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <complex>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <ismrmrd/dataset.h>

#include "tests/support/server_process.h"
#include "tests/support/wire_util.h"
#include "wire/codec.h"
#include "wire/progress.h"

namespace larmor {
namespace {

namespace fs = std::filesystem;
using namespace wire;
using test::FdByteReader;
using test::FdByteWriter;

std::string client_path() {
    if (const char* p = std::getenv("LARMOR_CLIENT")) return p;
    return std::string(LARMOR_BINARY_DIR) + "/tools/larmor-client";
}

const char* kHeader = R"(<?xml version="1.0"?>
<ismrmrdHeader xmlns="http://www.ismrm.org/ISMRMRD">
  <measurementInformation>
    <patientPosition>HFS</patientPosition>
    <measurementDependency>
      <dependencyType>Noise</dependencyType><measurementID>noise_1</measurementID>
    </measurementDependency>
  </measurementInformation>
  <experimentalConditions><H1resonanceFrequency_Hz>63500000</H1resonanceFrequency_Hz></experimentalConditions>
  <encoding>
    <encodedSpace>
      <matrixSize><x>8</x><y>4</y><z>1</z></matrixSize>
      <fieldOfView_mm><x>200</x><y>100</y><z>5</z></fieldOfView_mm>
    </encodedSpace>
    <reconSpace>
      <matrixSize><x>8</x><y>4</y><z>1</z></matrixSize>
      <fieldOfView_mm><x>200</x><y>100</y><z>5</z></fieldOfView_mm>
    </reconSpace>
    <encodingLimits></encodingLimits>
    <trajectory>cartesian</trajectory>
  </encoding>
</ismrmrdHeader>
)";

// Writes an ISMRMRD dataset of `n` acquisitions (time stamps 10, 20, ...) and the given waveforms.
void write_dataset(const std::string& path, uint32_t n, uint16_t samples, uint16_t channels,
                   const std::vector<uint32_t>& waveform_times) {
    ISMRMRD::Dataset ds(path.c_str(), "/dataset", true);
    ds.writeHeader(kHeader);
    for (uint32_t i = 0; i < n; ++i) {
        ISMRMRD::Acquisition acq(samples, channels, i == 0 ? 2 : 0);
        // Set in a copy of the header: ISMRMRD packs it to 2 bytes, so the references scan_counter() and
        // the like return are misaligned, and writing through them is undefined behaviour.
        ISMRMRD::AcquisitionHeader head = acq.getHead();
        head.scan_counter = i;
        head.acquisition_time_stamp = 10 * (i + 1);
        head.idx.kspace_encode_step_1 = static_cast<uint16_t>(i);
        acq.setHead(head);
        for (size_t k = 0; k < acq.getNumberOfDataElements(); ++k)
            acq.getDataPtr()[k] = std::complex<float>(static_cast<float>(i), static_cast<float>(k));
        for (size_t k = 0; k < acq.getNumberOfTrajElements(); ++k) acq.getTrajPtr()[k] = 0.1f * static_cast<float>(k);
        ds.appendAcquisition(acq);
    }
    for (size_t w = 0; w < waveform_times.size(); ++w) {
        ISMRMRD::Waveform wav(3, 1);
        wav.head.time_stamp = waveform_times[w];
        wav.head.waveform_id = static_cast<uint16_t>(w);
        for (size_t k = 0; k < wav.size(); ++k) wav.begin_data()[k] = static_cast<uint32_t>(100 * w + k);
        ds.appendWaveform(wav);
    }
}

// A one-connection TCP server on 127.0.0.1 that runs a script on the accepted socket in its own thread.
class FakeServer {
public:
    using Script = std::function<void(int fd)>;

    explicit FakeServer(Script script) {
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = 0;
        socklen_t len = sizeof addr;
        if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 1) != 0 ||
            ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
            throw std::runtime_error("FakeServer: cannot listen");
        port_ = ntohs(addr.sin_port);
        thread_ = std::thread([this, script] {
            pollfd p{listen_fd_, POLLIN, 0};
            if (::poll(&p, 1, 30000) != 1) {
                error_ = "no client connected";
                return;
            }
            int fd = ::accept(listen_fd_, nullptr, nullptr);
            if (fd < 0) {
                error_ = "accept failed";
                return;
            }
            try {
                script(fd);
            } catch (const std::exception& e) {
                error_ = e.what();
            }
            ::close(fd);
        });
    }
    ~FakeServer() {
        join();
        ::close(listen_fd_);
    }
    void join() {
        if (thread_.joinable()) thread_.join();
    }
    std::string port() const { return std::to_string(port_); }
    const std::string& error() const { return error_; }

private:
    int listen_fd_ = -1;
    uint16_t port_ = 0;
    std::thread thread_;
    std::string error_;
};

// Every message the client sends, CLOSE included.
std::vector<WireMessage> read_until_close(int fd) {
    FdByteReader in(fd);
    std::vector<WireMessage> got;
    for (;;) {
        got.push_back(read_message(in, Limits{}));
        if (std::holds_alternative<Close>(got.back())) return got;
    }
}

Image make_image(uint16_t data_type, size_t elem, uint16_t nx, uint16_t ny, uint16_t nz, uint16_t ch, uint16_t series,
                 uint16_t index, std::string meta) {
    Image im;
    im.head.version = 1;
    im.head.data_type = data_type;
    im.head.matrix_size[0] = nx;
    im.head.matrix_size[1] = ny;
    im.head.matrix_size[2] = nz;
    im.head.channels = ch;
    im.head.image_type = data_type == 7 ? 5 : 1;
    im.head.image_series_index = series;
    im.head.image_index = index;
    im.head.field_of_view[0] = 200;
    im.head.field_of_view[1] = 100;
    im.head.field_of_view[2] = 5;
    im.meta = std::move(meta);
    im.pixels.resize(size_t{nx} * ny * nz * ch * elem);
    for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 7 + index);
    if (data_type == 7) {  // finite complex values: a ramp
        std::vector<std::complex<float>> v(size_t{nx} * ny * nz * ch);
        for (size_t i = 0; i < v.size(); ++i) v[i] = std::complex<float>(static_cast<float>(i), 1.f);
        std::memcpy(im.pixels.data(), v.data(), im.pixels.size());
    }
    if (data_type == 5) {
        std::vector<float> v(size_t{nx} * ny * nz * ch);
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 11);
        std::memcpy(im.pixels.data(), v.data(), im.pixels.size());
    }
    return im;
}

struct RunResult {
    int exit_code = -1;
    std::string out, err;
    double seconds = 0;
};

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

class ClientTest : public ::testing::Test {
protected:
    void SetUp() override {
        std::string tmpl = (fs::temp_directory_path() / "larmor_client_test.XXXXXX").string();
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
        dir_ = tmpl;
        ASSERT_TRUE(fs::exists(client_path())) << client_path();
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    // Runs larmor-client with args; stdout and stderr captured.
    RunResult run(const std::vector<std::string>& args) {
        std::string cmd = "'" + client_path() + "'";
        for (const auto& a : args) cmd += " '" + a + "'";
        cmd += " >'" + (dir_ / "stdout").string() + "' 2>'" + (dir_ / "stderr").string() + "'";
        auto start = std::chrono::steady_clock::now();
        int status = std::system(cmd.c_str());
        RunResult r;
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        r.out = slurp(dir_ / "stdout");
        r.err = slurp(dir_ / "stderr");
        // Under the sanitizer build a report makes the client exit 1, which the error-path tests expect
        // anyway: the report itself fails the test.
        EXPECT_FALSE(test::has_sanitizer_report(r.err)) << r.err;
        return r;
    }

    std::string path(const std::string& name) const { return (dir_ / name).string(); }

    fs::path dir_;
};

TEST_F(ClientTest, StreamsTheDatasetInOrderAndStoresEveryImage) {
    const std::string input = path("in.h5");
    write_dataset(input, 5, 16, 2, {15, 100});

    const Image complex_a =
        make_image(7, 8, 8, 4, 1, 1, 3, 1, "<ismrmrdMeta><meta><name>A</name><value>1</value></meta></ismrmrdMeta>");
    const Image complex_b = make_image(7, 8, 8, 4, 1, 1, 3, 2, "");
    const Image volume = make_image(5, 4, 8, 4, 2, 1, 7, 1, "");
    const Image multi_coil = make_image(1, 2, 8, 4, 1, 2, 5, 1, "");
    std::vector<WireMessage> got;
    FakeServer server([&](int fd) {
        got = read_until_close(fd);
        FdByteWriter out(fd);
        write_message(out, Text{"hello from the server\n"});
        for (const Image* im : {&complex_a, &complex_b, &volume, &multi_coil}) write_message(out, *im);
        write_message(out, Close{});
    });
    RunResult r = run({"-a", "127.0.0.1", "-p", server.port(), "-f", input, "-o", path("out.h5"), "-G", "recon",
                       "--png", path("png")});
    server.join();
    ASSERT_EQ(server.error(), "");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("[server] hello from the server\n"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Noise dependency"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("sent 5 acquisitions and 2 waveforms ("), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("received 4 images"), std::string::npos) << r.out;

    // CONFIG_FILE, PARAMETER_SCRIPT, acquisitions with the waveforms at their time stamps, CLOSE.
    ASSERT_EQ(got.size(), 2u + 5 + 2 + 1);
    EXPECT_EQ(std::get<ConfigFile>(got[0]).name, "default.xml");
    EXPECT_EQ(std::get<ParameterScript>(got[1]).xml, kHeader);
    // Acquisition time stamps are 10, 20, ..., 50 and waveform time stamps 15 and 100; -1 = waveform.
    const std::vector<int> order = {0, -1, 1, 2, 3, 4, -1};
    uint32_t waveforms = 0;
    for (size_t i = 0; i < order.size(); ++i) {
        const WireMessage& m = got[2 + i];
        if (order[i] < 0) {
            const auto& w = std::get<Waveform>(m);
            EXPECT_EQ(w.head.waveform_id, waveforms);
            EXPECT_EQ(w.data, (std::vector<uint32_t>{100 * waveforms, 100 * waveforms + 1, 100 * waveforms + 2}));
            ++waveforms;
            continue;
        }
        const auto& a = std::get<Acquisition>(m);
        // Packed header fields are copied before EXPECT_EQ binds references to them.
        EXPECT_EQ(uint32_t{a.head.scan_counter}, static_cast<uint32_t>(order[i]));
        EXPECT_EQ(uint32_t{a.head.acquisition_time_stamp}, 10 * (a.head.scan_counter + 1));
        EXPECT_EQ(a.head.number_of_samples, 16);
        EXPECT_EQ(a.head.active_channels, 2);
        ASSERT_EQ(a.data.size(), 32u);
        EXPECT_EQ(a.data[5], std::complex<float>(static_cast<float>(a.head.scan_counter), 5.f));
        EXPECT_EQ(a.traj.size(), a.head.scan_counter == 0 ? 32u : 0u);  // 16 samples x 2 dimensions
    }
    EXPECT_TRUE(std::holds_alternative<Close>(got.back()));

    // HDF5: <group>/image_<series>, as Gadgetron's client writes it.
    ISMRMRD::Dataset out(path("out.h5").c_str(), "recon", false);
    EXPECT_EQ(out.getNumberOfImages("image_3"), 2u);
    EXPECT_EQ(out.getNumberOfImages("image_7"), 1u);
    EXPECT_EQ(out.getNumberOfImages("image_5"), 1u);
    ISMRMRD::Image<std::complex<float>> back;
    out.readImage("image_3", 0, back);
    EXPECT_EQ(back.getMatrixSizeX(), 8u);
    EXPECT_EQ(back.getMatrixSizeY(), 4u);
    EXPECT_EQ(back.getImageIndex(), 1u);
    EXPECT_EQ(0, std::memcmp(back.getDataPtr(), complex_a.pixels.data(), complex_a.pixels.size()));
    std::string attr;
    back.getAttributeString(attr);
    EXPECT_EQ(attr, complex_a.meta);
    ISMRMRD::Image<uint16_t> coils;
    out.readImage("image_5", 0, coils);
    EXPECT_EQ(coils.getNumberOfChannels(), 2u);
    EXPECT_EQ(0, std::memcmp(coils.getDataPtr(), multi_coil.pixels.data(), multi_coil.pixels.size()));

    // PNG: one per 2D slice and channel, 8x4 greyscale.
    for (const char* name : {"3_1.png", "3_2.png", "7_1_0.png", "7_1_1.png", "5_1_c0.png", "5_1_c1.png"}) {
        std::string png = slurp(fs::path(path("png")) / name);
        ASSERT_GT(png.size(), 33u) << name;
        EXPECT_EQ(png.substr(1, 3), "PNG") << name;
        auto be32 = [&](size_t at) {
            return (uint32_t{uint8_t(png[at])} << 24) | (uint32_t{uint8_t(png[at + 1])} << 16) |
                   (uint32_t{uint8_t(png[at + 2])} << 8) | uint8_t(png[at + 3]);
        };
        EXPECT_EQ(be32(16), 8u) << name;  // IHDR width
        EXPECT_EQ(be32(20), 4u) << name;  // IHDR height
        EXPECT_EQ(png[24], 8) << name;    // bit depth
        EXPECT_EQ(png[25], 0) << name;    // colour type: greyscale
    }
}

TEST_F(ClientTest, SendImagesGoAfterTheHeaderAndBeforeTheFirstAcquisition) {
    const std::string input = path("in.h5");
    write_dataset(input, 3, 8, 1, {15});
    {
        // Two variables of different pixel types: the client sends them as stored, in the order asked.
        ISMRMRD::Dataset ds(input.c_str(), "/dataset", false);
        for (uint16_t index = 1; index <= 2; ++index) {
            ISMRMRD::Image<float> ref(8, 4, 1, 1);
            ISMRMRD::ImageHeader head = ref.getHead();  // set in a copy: the packed header's references misalign
            head.image_index = index;
            head.image_type = ISMRMRD::ISMRMRD_IMTYPE_MAGNITUDE;
            ref.setHead(head);
            ref.setAttributeString("<ismrmrdMeta><meta><name>LarmorRole</name><value>AnatomicalReference</value>"
                                   "</meta></ismrmrdMeta>");
            for (size_t k = 0; k < ref.getNumberOfDataElements(); ++k) ref.getDataPtr()[k] = 0.5f * float(k + index);
            ds.appendImage("reference", ref);
        }
        ISMRMRD::Image<uint16_t> mask(4, 2, 3, 2);
        for (size_t k = 0; k < mask.getNumberOfDataElements(); ++k) mask.getDataPtr()[k] = static_cast<uint16_t>(k);
        ds.appendImage("mask", mask);
    }
    std::vector<WireMessage> got;
    FakeServer server([&](int fd) {
        got = read_until_close(fd);
        FdByteWriter out(fd);
        write_message(out, Close{});
    });
    RunResult r = run({"-a", "127.0.0.1", "-p", server.port(), "-f", input, "-o", path("out.h5"), "--send-images",
                       "reference", "--send-images", "mask"});
    server.join();
    ASSERT_EQ(server.error(), "");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("sent 3 images, 3 acquisitions and 1 waveforms ("), std::string::npos) << r.out;

    // CONFIG_FILE, PARAMETER_SCRIPT, the images, then the acquisitions (the waveform at its time stamp).
    ASSERT_EQ(got.size(), 2u + 3 + 3 + 1 + 1);
    EXPECT_TRUE(std::holds_alternative<ConfigFile>(got[0]));
    EXPECT_TRUE(std::holds_alternative<ParameterScript>(got[1]));
    for (size_t i = 2; i < 5; ++i) ASSERT_TRUE(std::holds_alternative<Image>(got[i])) << "message " << i;
    EXPECT_TRUE(std::holds_alternative<Acquisition>(got[5]));
    EXPECT_TRUE(std::holds_alternative<Close>(got.back()));

    for (uint16_t index = 1; index <= 2; ++index) {
        const Image& im = std::get<Image>(got[1 + index]);
        EXPECT_EQ(im.head.data_type, ISMRMRD::ISMRMRD_FLOAT);
        EXPECT_EQ(im.head.image_index, index);
        EXPECT_EQ(im.head.matrix_size[0], 8);
        EXPECT_EQ(im.head.matrix_size[1], 4);
        EXPECT_NE(im.meta.find("AnatomicalReference"), std::string::npos) << im.meta;
        std::vector<float> v(im.pixels.size() / sizeof(float));
        ASSERT_EQ(v.size(), 32u);
        std::memcpy(v.data(), im.pixels.data(), im.pixels.size());
        for (size_t k = 0; k < v.size(); ++k) EXPECT_EQ(v[k], 0.5f * float(k + index)) << k;
    }
    const Image& mask = std::get<Image>(got[4]);
    EXPECT_EQ(mask.head.data_type, ISMRMRD::ISMRMRD_USHORT);
    EXPECT_EQ(mask.head.matrix_size[2], 3);
    EXPECT_EQ(mask.head.channels, 2);
    ASSERT_EQ(mask.pixels.size(), 4u * 2 * 3 * 2 * sizeof(uint16_t));
    std::vector<uint16_t> m(mask.pixels.size() / sizeof(uint16_t));
    std::memcpy(m.data(), mask.pixels.data(), mask.pixels.size());
    for (size_t k = 0; k < m.size(); ++k) EXPECT_EQ(m[k], k) << k;
    EXPECT_EQ(mask.meta, "");

    // A variable that is not there: named with the file and group, nothing sent.
    RunResult missing = run({"-p", "1", "-f", input, "--send-images", "reference", "--send-images", "nosuchvar"});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("--send-images: no image variable 'nosuchvar' in group '/dataset' of '" + input + "'"),
              std::string::npos)
        << missing.err;
    EXPECT_EQ(missing.err.find("HDF5"), std::string::npos) << "library noise on stderr: " << missing.err;
}

// What the server says in the progress tests: two progress lines, an ordinary TEXT, then two more
// progress lines of which the second is shorter than the first.
void send_progress_script(int fd) {
    read_until_close(fd);
    FdByteWriter out(fd);
    write_message(out, Text{format_progress({"cg_sense", 1, 3, 0.1})});
    write_message(out, Text{format_progress({"cg_sense", 2, 3, 0.01})});
    write_message(out, Text{"coil maps done\n"});
    write_message(out, Text{format_progress({"cg_sense_long", 1, 30, 0.5})});
    write_message(out, Text{format_progress({"cg", 2, 30, 0.25})});
    write_message(out, Close{});
}

TEST_F(ClientTest, ProgressLinesArePlainLinesWhenStderrIsNoTerminal) {
    const std::string input = path("in.h5");
    write_dataset(input, 2, 8, 1, {});
    FakeServer server(send_progress_script);
    RunResult r = run({"-a", "127.0.0.1", "-p", server.port(), "-f", input, "-o", path("out.h5")});
    server.join();
    ASSERT_EQ(server.error(), "");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // A log keeps every line, each exactly as a stock client would show it.
    EXPECT_NE(r.err.find("[server] progress cg_sense: iteration 1/3, residual 1.00e-01\n"
                         "[server] progress cg_sense: iteration 2/3, residual 1.00e-02\n"
                         "[server] coil maps done\n"
                         "[server] progress cg_sense_long: iteration 1/30, residual 5.00e-01\n"
                         "[server] progress cg: iteration 2/30, residual 2.50e-01\n"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
}

// Runs the client on a pseudo-terminal (stdout and stderr both) and returns all it wrote there.
std::string run_on_terminal(const std::vector<std::string>& args, int& exit_code) {
    std::vector<std::string> argv_strings{client_path()};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    termios raw{};
    cfmakeraw(&raw);  // no output processing: the bytes arrive as the client wrote them ('\n' stays '\n')
    int master = -1;
    const pid_t pid = ::forkpty(&master, nullptr, &raw, nullptr);
    if (pid < 0) throw std::runtime_error("forkpty failed");
    if (pid == 0) {
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            break;
        }
        pollfd p{master, POLLIN, 0};
        const int ready = ::poll(&p, 1, 1000);
        if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
        if (ready < 0) break;
        char buf[4096];
        const ssize_t n = ::read(master, buf, sizeof buf);
        if (n > 0) out.append(buf, size_t(n));
        else if (n == 0 || errno != EINTR) break;  // EIO: the client has exited and all was read
    }
    ::close(master);
    int status = 0;
    ::waitpid(pid, &status, 0);
    exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return out;
}

TEST_F(ClientTest, ProgressSharesOneLineOnATerminal) {
    const std::string input = path("in.h5");
    write_dataset(input, 2, 8, 1, {});
    FakeServer server(send_progress_script);
    int exit_code = -1;
    const std::string out =
        run_on_terminal({"-a", "127.0.0.1", "-p", server.port(), "-f", input, "-o", path("out.h5")}, exit_code);
    server.join();
    ASSERT_EQ(server.error(), "");
    EXPECT_EQ(exit_code, 0) << out;
    EXPECT_FALSE(test::has_sanitizer_report(out)) << out;
    const std::string first = "[server] progress cg_sense: iteration 1/3, residual 1.00e-01";
    const std::string second = "[server] progress cg_sense: iteration 2/3, residual 1.00e-02";
    const std::string longer = "[server] progress cg_sense_long: iteration 1/30, residual 5.00e-01";
    const std::string shorter = "[server] progress cg: iteration 2/30, residual 2.50e-01";
    // Each progress line returns to the start of the status line; an ordinary TEXT first ends it; a
    // shorter line blanks the rest of a longer one; the status line is ended before the summary.
    const std::string expected = "\r" + first + "\r" + second + "\n[server] coil maps done\n\r" + longer + "\r" +
                                 shorter + std::string(longer.size() - shorter.size(), ' ') + "\nsent 2 acquisitions";
    EXPECT_NE(out.find(expected), std::string::npos) << "got:\n" << out;
}

TEST_F(ClientTest, LocalConfigGoesAsConfigScriptAndServerErrorFailsTheRun) {
    const std::string input = path("in.h5");
    write_dataset(input, 2, 8, 1, {});
    const std::string chain = "<gadgetronStreamConfiguration><gadget/></gadgetronStreamConfiguration>";
    std::ofstream(path("chain.xml")) << chain;
    std::vector<WireMessage> got;
    FakeServer server([&](int fd) {
        got = read_until_close(fd);
        FdByteWriter out(fd);
        write_message(out, Text{"[grappa] ERROR: calibration failed"});
        write_message(out, Close{});
    });
    RunResult r = run({"-a", "127.0.0.1", "-p", server.port(), "-f", input, "-C", path("chain.xml"), "-o",
                       path("out.h5"), "-q"});
    server.join();
    ASSERT_EQ(server.error(), "");
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(std::get<ConfigScript>(got[0]).text, chain);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("[server] [grappa] ERROR: calibration failed"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");  // -q: no summary
    EXPECT_FALSE(fs::exists(path("out.h5")));  // no images, no file
}

TEST_F(ClientTest, EndOfStreamWithoutCloseFails) {
    const std::string input = path("in.h5");
    write_dataset(input, 2, 8, 1, {});
    FakeServer server([&](int fd) { read_until_close(fd); });
    RunResult r = run({"-a", "127.0.0.1", "-p", server.port(), "-f", input, "-o", path("out.h5")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("without sending CLOSE"), std::string::npos) << r.err;
}

TEST_F(ClientTest, UnknownMessageFromServerFails) {
    const std::string input = path("in.h5");
    write_dataset(input, 2, 8, 1, {});
    FakeServer server([&](int fd) {
        read_until_close(fd);
        uint16_t bogus = 4242;
        FdByteWriter(fd).write_all(&bogus, 2);
    });
    RunResult r = run({"-a", "127.0.0.1", "-p", server.port(), "-f", input, "-o", path("out.h5")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("unknown message id 4242"), std::string::npos) << r.err;
}

TEST_F(ClientTest, TruncatedImageFromServerFails) {
    const std::string input = path("in.h5");
    write_dataset(input, 1, 8, 1, {});
    FakeServer server([&](int fd) {
        read_until_close(fd);
        std::vector<uint8_t> bytes = encode(make_image(7, 8, 8, 4, 1, 1, 1, 1, ""));
        bytes.resize(bytes.size() - 10);
        FdByteWriter(fd).write_all(bytes.data(), bytes.size());
    });
    RunResult r = run({"-a", "127.0.0.1", "-p", server.port(), "-f", input, "-o", path("out.h5")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("truncated IMAGE message"), std::string::npos) << r.err;
}

TEST_F(ClientTest, QueryPrintsTheResponseAndSendsNoData) {
    std::vector<WireMessage> got;
    FakeServer server([&](int fd) {
        got = read_until_close(fd);
        FdByteWriter out(fd);
        ASSERT_FALSE(got.empty());
        const auto& q = std::get<Query>(got[0]);
        write_message(out, Response{q.correlation_id, "larmor 0.1.0"});
        write_message(out, Close{});
    });
    // Default address "localhost": the client must fall back to 127.0.0.1 when ::1 refuses.
    RunResult r = run({"-p", server.port(), "-Q", "gadgetron::version"});
    server.join();
    ASSERT_EQ(server.error(), "");
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(std::get<Query>(got[0]).key, "gadgetron::version");
    EXPECT_EQ(std::get<Query>(got[0]).reserved, 0u);
    EXPECT_TRUE(std::holds_alternative<Close>(got[1]));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "larmor 0.1.0\n");
}

TEST_F(ClientTest, ServerEndingTheSessionEarlyStopsTheUpload) {
    // ~40 MB of data: the server gives up after the header, the client must stop, report, not hang.
    const std::string input = path("in.h5");
    write_dataset(input, 2500, 512, 4, {});
    FakeServer server([&](int fd) {
        FdByteReader in(fd);
        read_message(in, Limits{});
        read_message(in, Limits{});
        FdByteWriter out(fd);
        write_message(out, Text{"[session] ERROR: no such chain"});
        write_message(out, Close{});
        ::shutdown(fd, SHUT_WR);
        // Keep draining a little, as Larmor does, then hang up.
        char buf[65536];
        for (int i = 0; i < 64 && ::read(fd, buf, sizeof buf) > 0; ++i) {
        }
    });
    RunResult r = run({"-a", "127.0.0.1", "-p", server.port(), "-f", input, "-o", path("out.h5"), "-t", "20"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("ERROR: no such chain"), std::string::npos) << r.err;
    EXPECT_LT(r.seconds, 15.0);
}

TEST_F(ClientTest, SilentServerTimesOut) {
    const std::string input = path("in.h5");
    write_dataset(input, 1, 8, 1, {});
    FakeServer server([&](int fd) {
        read_until_close(fd);
        // Say nothing until the client gives up and hangs up.
        char c;
        while (::read(fd, &c, 1) > 0) {
        }
    });
    RunResult r = run({"-a", "127.0.0.1", "-p", server.port(), "-f", input, "-o", path("out.h5"), "-t", "1"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no traffic"), std::string::npos) << r.err;
    EXPECT_LT(r.seconds, 8.0);
}

TEST_F(ClientTest, ConnectionRefusedFails) {
    const std::string input = path("in.h5");
    write_dataset(input, 1, 8, 1, {});
    std::string port;
    {
        FakeServer closed([](int) {});  // take a free port, then let it go
        port = closed.port();
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
        ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        ::close(fd);
    }
    RunResult r = run({"-a", "127.0.0.1", "-p", port, "-f", input, "-t", "5"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot connect to 127.0.0.1:" + port), std::string::npos) << r.err;
}

TEST_F(ClientTest, BadInputIsReportedBeforeConnecting) {
    RunResult missing = run({"-p", "1", "-f", path("nope.h5")});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("input file '" + path("nope.h5") + "' not found"), std::string::npos) << missing.err;

    std::ofstream(path("junk.h5")) << "not hdf5";
    RunResult junk = run({"-p", "1", "-f", path("junk.h5")});
    EXPECT_EQ(junk.exit_code, 1);
    EXPECT_NE(junk.err.find("cannot read ISMRMRD dataset"), std::string::npos) << junk.err;
    EXPECT_EQ(junk.err.find("HDF5 Error"), std::string::npos) << "library noise on stderr: " << junk.err;

    RunResult none = run({});
    EXPECT_EQ(none.exit_code, 2);
    EXPECT_NE(none.err.find("no input"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace larmor
