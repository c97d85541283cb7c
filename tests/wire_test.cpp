// Wire codec (wire/codec.h): byte layout against ISMRMRD's own structs, byte-exact round trips of every
// message, and every malformed input a peer can send.
#include <gtest/gtest.h>

#include <atomic>
#include <complex>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "wire/codec.h"
#include "wire/float_checks.h"
#include "wire/sample_pool.h"
#include "tests/support/nhlbi_encoder.h"
#include "tests/support/wire_util.h"

// ---------------------------------------------------------------------------------------------------
// Allocation probe: the largest single allocation made on this thread while a probe is active, so the
// tests can show that an absurd length is rejected before anything of that size is allocated.
namespace {
std::atomic<size_t> g_largest_allocation{0};
thread_local bool g_probing = false;
}  // namespace

// noinline: inlined into std::vector's code, malloc/free trip GCC 12's -Wstringop-overflow and
// -Wmismatched-new-delete false positives.
__attribute__((noinline)) void* operator new(size_t n) {
    if (g_probing && n > g_largest_allocation.load()) g_largest_allocation.store(n);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace larmor {
namespace {

using namespace wire;
using test::decode_all;
using test::decode_one;
using test::MemoryReader;
using test::MemoryWriter;

class AllocationProbe {
public:
    AllocationProbe() {
        g_largest_allocation = 0;
        g_probing = true;
    }
    ~AllocationProbe() { g_probing = false; }
    size_t largest() const { return g_largest_allocation.load(); }
};

// Little-endian byte builder for hand-written streams.
struct Bytes {
    std::vector<uint8_t> b;
    template <typename T>
    Bytes& pod(T v) {
        return raw(&v, sizeof v);
    }
    Bytes& u16(uint16_t v) { return pod(v); }
    Bytes& u32(uint32_t v) { return pod(v); }
    Bytes& u64(uint64_t v) { return pod(v); }
    Bytes& raw(const void* p, size_t n) {
        size_t at = b.size();
        b.resize(at + n);
        if (n > 0) std::memcpy(b.data() + at, p, n);
        return *this;
    }
    Bytes& str(const std::string& s) { return raw(s.data(), s.size()); }
};

// Runs the decoder on bytes and returns the message of the exception of type E it must throw.
template <typename E>
std::string error_of(const std::vector<uint8_t>& bytes, const Limits& limits = {}) {
    try {
        decode_one(bytes, limits);
    } catch (const E& e) {
        return e.what();
    }
    ADD_FAILURE() << "decoding did not throw the expected exception";
    return {};
}

// Fills a struct with a byte pattern so every field holds a distinct, recognisable value.
template <typename T>
void fill_pattern(T& v, uint8_t seed) {
    auto* p = reinterpret_cast<uint8_t*>(&v);
    for (size_t i = 0; i < sizeof v; ++i) p[i] = static_cast<uint8_t>(seed + 7 * i + 1);
}

Acquisition make_acquisition(uint16_t samples, uint16_t channels, uint16_t traj_dims) {
    Acquisition a;
    fill_pattern(a.head, 3);
    a.head.flags &= ~((uint64_t{1} << 52) | (uint64_t{1} << 53));  // not compressed
    a.head.number_of_samples = samples;
    a.head.active_channels = channels;
    a.head.trajectory_dimensions = traj_dims;
    a.traj.resize(size_t{samples} * traj_dims);
    for (size_t i = 0; i < a.traj.size(); ++i) a.traj[i] = 0.25f * static_cast<float>(i) - 3.f;
    a.data.resize(size_t{samples} * channels);
    for (size_t i = 0; i < a.data.size(); ++i)
        a.data[i] = std::complex<float>(static_cast<float>(i), -0.5f * static_cast<float>(i));
    return a;
}

Image make_image(uint16_t data_type, uint16_t nx, uint16_t ny, uint16_t nz, uint16_t channels, std::string meta) {
    static const size_t kElem[] = {0, 2, 2, 4, 4, 4, 8, 8, 16};
    Image im;
    fill_pattern(im.head, 11);
    im.head.data_type = data_type;
    im.head.matrix_size[0] = nx;
    im.head.matrix_size[1] = ny;
    im.head.matrix_size[2] = nz;
    im.head.channels = channels;
    im.head.attribute_string_len = static_cast<uint32_t>(meta.size());
    im.meta = std::move(meta);
    im.pixels.resize(size_t{nx} * ny * nz * channels * kElem[data_type]);
    for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 13 + 5);
    return im;
}

Waveform make_waveform(uint16_t samples, uint16_t channels) {
    Waveform w;
    w.head.version = 1;
    w.head.flags = 0x0102030405060708ull;
    w.head.measurement_uid = 0x11121314;
    w.head.scan_counter = 0x21222324;
    w.head.time_stamp = 0x31323334;
    w.head.number_of_samples = samples;
    w.head.channels = channels;
    w.head.sample_time_us = 2.5f;
    w.head.waveform_id = 0x4142;
    w.data.resize(size_t{samples} * channels);
    for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = static_cast<uint32_t>(0xA0000000u + i);
    return w;
}

const std::string kMeta =
    "<?xml version=\"1.0\"?><ismrmrdMeta><meta><name>GADGETRON_DataRole</name><value>Image</value></meta>"
    "</ismrmrdMeta>";

// Every message type, with payloads that exercise every field.
std::vector<WireMessage> one_of_each() {
    DicomWithName dicom;
    dicom.dicom = {0x44, 0x49, 0x43, 0x4d, 0x00, 0xff};
    dicom.filename = "img_0001.dcm";
    dicom.meta_xml = kMeta;
    return {ConfigFile{"default.xml"},
            ConfigScript{"<gadgetronStreamConfiguration/>"},
            ParameterScript{"<ismrmrdHeader/>"},
            Close{},
            Text{"[chain] ERROR: something"},
            Query{0, 77, "gadgetron::version"},
            Response{77, "larmor 0.1.0"},
            make_acquisition(8, 3, 0),
            make_acquisition(5, 2, 3),
            make_waveform(4, 2),
            make_image(7, 4, 3, 2, 2, kMeta),
            make_image(1, 5, 1, 1, 1, ""),
            DependencyQuery{kMeta},
            dicom};
}

// ---------------------------------------------------------------------------------------------------
// Layout against ISMRMRD's structs

TEST(WireLayout, HeaderSizesMatchIsmrmrd) {
    EXPECT_EQ(sizeof(ISMRMRD::ISMRMRD_AcquisitionHeader), 340u);
    EXPECT_EQ(sizeof(ISMRMRD::ISMRMRD_ImageHeader), 198u);
    EXPECT_EQ(sizeof(ISMRMRD::ISMRMRD_WaveformHeader), 40u);
    EXPECT_EQ(kAcquisitionHeaderBytes, 340u);
    EXPECT_EQ(kImageHeaderBytes, 198u);
    EXPECT_EQ(kWaveformHeaderBytes, 40u);
    EXPECT_EQ(kConfigFileNameBytes, 1024u);
}

// Checks that ISMRMRD places `field` at `offset` (the ISMRMRD 1.8 layout) and that the encoder put the
// field's value there (the message id takes the first 2 bytes of the encoded stream).
#define EXPECT_FIELD_AT(Struct, value, bytes, field, offset)                                              \
    do {                                                                                                    \
        EXPECT_EQ(offsetof(Struct, field), size_t{offset}) << #field;                                       \
        ASSERT_GE((bytes).size(), 2 + size_t{offset} + sizeof((value).field));                              \
        EXPECT_EQ(0, std::memcmp((bytes).data() + 2 + (offset), &(value).field, sizeof((value).field)))    \
            << #field << " not at byte " << (offset);                                                       \
    } while (0)

TEST(WireLayout, AcquisitionHeaderFieldOffsets) {
    using H = ISMRMRD::ISMRMRD_AcquisitionHeader;
    Acquisition a = make_acquisition(4, 2, 2);
    std::vector<uint8_t> bytes = encode(a);
    const H& h = a.head;
    ASSERT_EQ(bytes.size(), 2 + 340 + 4 * 2 * 4 + 4 * 2 * 8);
    EXPECT_EQ(bytes[0], 1008 & 0xff);
    EXPECT_EQ(bytes[1], 1008 >> 8);
    EXPECT_FIELD_AT(H, h, bytes, version, 0);
    EXPECT_FIELD_AT(H, h, bytes, flags, 2);
    EXPECT_FIELD_AT(H, h, bytes, measurement_uid, 10);
    EXPECT_FIELD_AT(H, h, bytes, scan_counter, 14);
    EXPECT_FIELD_AT(H, h, bytes, acquisition_time_stamp, 18);
    EXPECT_FIELD_AT(H, h, bytes, physiology_time_stamp, 22);
    EXPECT_FIELD_AT(H, h, bytes, number_of_samples, 34);
    EXPECT_FIELD_AT(H, h, bytes, available_channels, 36);
    EXPECT_FIELD_AT(H, h, bytes, active_channels, 38);
    EXPECT_FIELD_AT(H, h, bytes, channel_mask, 40);
    EXPECT_FIELD_AT(H, h, bytes, discard_pre, 168);
    EXPECT_FIELD_AT(H, h, bytes, discard_post, 170);
    EXPECT_FIELD_AT(H, h, bytes, center_sample, 172);
    EXPECT_FIELD_AT(H, h, bytes, encoding_space_ref, 174);
    EXPECT_FIELD_AT(H, h, bytes, trajectory_dimensions, 176);
    EXPECT_FIELD_AT(H, h, bytes, sample_time_us, 178);
    EXPECT_FIELD_AT(H, h, bytes, position, 182);
    EXPECT_FIELD_AT(H, h, bytes, read_dir, 194);
    EXPECT_FIELD_AT(H, h, bytes, phase_dir, 206);
    EXPECT_FIELD_AT(H, h, bytes, slice_dir, 218);
    EXPECT_FIELD_AT(H, h, bytes, patient_table_position, 230);
    EXPECT_FIELD_AT(H, h, bytes, idx, 242);
    EXPECT_FIELD_AT(H, h, bytes, user_int, 276);
    EXPECT_FIELD_AT(H, h, bytes, user_float, 308);
    // Trajectory right after the header, then data, both sample fastest.
    EXPECT_EQ(0, std::memcmp(bytes.data() + 2 + 340, a.traj.data(), a.traj.size() * 4));
    EXPECT_EQ(0, std::memcmp(bytes.data() + 2 + 340 + a.traj.size() * 4, a.data.data(), a.data.size() * 8));
}

TEST(WireLayout, ImageHeaderFieldOffsets) {
    using H = ISMRMRD::ISMRMRD_ImageHeader;
    Image im = make_image(5, 2, 2, 1, 1, kMeta);
    std::vector<uint8_t> bytes = encode(im);
    const H& h = im.head;
    ASSERT_EQ(bytes.size(), 2 + 198 + 8 + kMeta.size() + 2 * 2 * 4);
    EXPECT_FIELD_AT(H, h, bytes, version, 0);
    EXPECT_FIELD_AT(H, h, bytes, data_type, 2);
    EXPECT_FIELD_AT(H, h, bytes, flags, 4);
    EXPECT_FIELD_AT(H, h, bytes, measurement_uid, 12);
    EXPECT_FIELD_AT(H, h, bytes, matrix_size, 16);
    EXPECT_FIELD_AT(H, h, bytes, field_of_view, 22);
    EXPECT_FIELD_AT(H, h, bytes, channels, 34);
    EXPECT_FIELD_AT(H, h, bytes, position, 36);
    EXPECT_FIELD_AT(H, h, bytes, read_dir, 48);
    EXPECT_FIELD_AT(H, h, bytes, phase_dir, 60);
    EXPECT_FIELD_AT(H, h, bytes, slice_dir, 72);
    EXPECT_FIELD_AT(H, h, bytes, patient_table_position, 84);
    EXPECT_FIELD_AT(H, h, bytes, average, 96);
    EXPECT_FIELD_AT(H, h, bytes, slice, 98);
    EXPECT_FIELD_AT(H, h, bytes, contrast, 100);
    EXPECT_FIELD_AT(H, h, bytes, phase, 102);
    EXPECT_FIELD_AT(H, h, bytes, repetition, 104);
    EXPECT_FIELD_AT(H, h, bytes, set, 106);
    EXPECT_FIELD_AT(H, h, bytes, acquisition_time_stamp, 108);
    EXPECT_FIELD_AT(H, h, bytes, physiology_time_stamp, 112);
    EXPECT_FIELD_AT(H, h, bytes, image_type, 124);
    EXPECT_FIELD_AT(H, h, bytes, image_index, 126);
    EXPECT_FIELD_AT(H, h, bytes, image_series_index, 128);
    EXPECT_FIELD_AT(H, h, bytes, user_int, 130);
    EXPECT_FIELD_AT(H, h, bytes, user_float, 162);
    EXPECT_FIELD_AT(H, h, bytes, attribute_string_len, 194);
    // u64 meta length, the meta text without NUL, then the pixels.
    uint64_t meta_len = 0;
    std::memcpy(&meta_len, bytes.data() + 2 + 198, 8);
    EXPECT_EQ(meta_len, kMeta.size());
    EXPECT_EQ(std::string(bytes.begin() + 2 + 198 + 8, bytes.begin() + 2 + 198 + 8 + kMeta.size()), kMeta);
    EXPECT_EQ(0, std::memcmp(bytes.data() + 2 + 198 + 8 + kMeta.size(), im.pixels.data(), im.pixels.size()));
}

TEST(WireLayout, WaveformHeaderFieldOffsetsAndZeroPadding) {
    using H = ISMRMRD::ISMRMRD_WaveformHeader;
    Waveform w = make_waveform(3, 2);
    std::vector<uint8_t> bytes = encode(w);
    const H& h = w.head;
    ASSERT_EQ(bytes.size(), 2 + 40 + 3 * 2 * 4);
    EXPECT_FIELD_AT(H, h, bytes, version, 0);
    EXPECT_FIELD_AT(H, h, bytes, flags, 8);
    EXPECT_FIELD_AT(H, h, bytes, measurement_uid, 16);
    EXPECT_FIELD_AT(H, h, bytes, scan_counter, 20);
    EXPECT_FIELD_AT(H, h, bytes, time_stamp, 24);
    EXPECT_FIELD_AT(H, h, bytes, number_of_samples, 28);
    EXPECT_FIELD_AT(H, h, bytes, channels, 30);
    EXPECT_FIELD_AT(H, h, bytes, sample_time_us, 32);
    EXPECT_FIELD_AT(H, h, bytes, waveform_id, 36);
    // The struct's padding goes out as zeros, whatever the memory held.
    for (size_t i : {2, 3, 4, 5, 6, 7, 38, 39}) EXPECT_EQ(bytes[2 + i], 0) << "padding byte " << i;
    EXPECT_EQ(0, std::memcmp(bytes.data() + 2 + 40, w.data.data(), w.data.size() * 4));
}

// ---------------------------------------------------------------------------------------------------
// Byte-exact encodings of the small messages, written out by hand from protocol.md

TEST(WireEncode, SmallMessagesMatchTheSpecByteForByte) {
    std::vector<uint8_t> name(1024, 0);
    std::memcpy(name.data(), "default.xml", 11);
    EXPECT_EQ(encode(ConfigFile{"default.xml"}), Bytes().u16(1).raw(name.data(), name.size()).b);
    EXPECT_EQ(encode(ConfigScript{"<c/>"}), Bytes().u16(2).u32(4).str("<c/>").b);
    EXPECT_EQ(encode(ParameterScript{"<h/>"}), Bytes().u16(3).u32(4).str("<h/>").b);
    EXPECT_EQ(encode(Close{}), Bytes().u16(4).b);
    EXPECT_EQ(encode(Text{"hello"}), Bytes().u16(5).u32(5).str("hello").b);
    EXPECT_EQ(encode(Text{""}), Bytes().u16(5).u32(0).b);
    EXPECT_EQ(encode(Query{0, 9, "k"}), Bytes().u16(6).u64(0).u64(9).u64(1).str("k").b);
    EXPECT_EQ(encode(Response{9, "v1"}), Bytes().u16(7).u64(9).u64(2).str("v1").b);
    EXPECT_EQ(encode(DependencyQuery{"<m/>"}), Bytes().u16(1019).u64(4).str("<m/>").b);
    DicomWithName d{{1, 2, 3}, "a.dcm", "<m/>"};
    const uint8_t dicom_bytes[] = {1, 2, 3};
    EXPECT_EQ(encode(d), Bytes().u16(1018).u32(3).raw(dicom_bytes, 3).u64(5).str("a.dcm").u64(4).str("<m/>").b);
    // The id is little-endian: 1008 = 0x03F0.
    std::vector<uint8_t> acq = encode(make_acquisition(1, 1, 0));
    EXPECT_EQ(acq[0], 0xF0);
    EXPECT_EQ(acq[1], 0x03);
}

// ---------------------------------------------------------------------------------------------------
// Round trips

TEST(WireRoundTrip, EveryMessageTypeIsByteExact) {
    for (const WireMessage& msg : one_of_each()) {
        std::vector<uint8_t> bytes = encode(msg);
        WireMessage back = decode_one(bytes);
        EXPECT_EQ(back.index(), msg.index());
        EXPECT_EQ(encode(back), bytes) << "message index " << msg.index();
    }
}

TEST(WireRoundTrip, WriteMessageWritesTheSameBytesAsEncode) {
    MemoryWriter out;
    std::vector<uint8_t> expected;
    for (const WireMessage& msg : one_of_each()) {
        write_message(out, msg);
        std::vector<uint8_t> e = encode(msg);
        expected.insert(expected.end(), e.begin(), e.end());
    }
    EXPECT_EQ(out.bytes(), expected);
    // A stream of back-to-back messages decodes message by message.
    EXPECT_EQ(decode_all(out.bytes()).size(), one_of_each().size());
}

TEST(WireRoundTrip, DecodedFieldsMatch) {
    {
        Acquisition a = make_acquisition(6, 4, 3);
        auto back = std::get<Acquisition>(decode_one(encode(a)));
        EXPECT_EQ(0, std::memcmp(&back.head, &a.head, sizeof a.head));
        EXPECT_EQ(back.traj, a.traj);
        EXPECT_EQ(back.data, a.data);
    }
    {
        Waveform w = make_waveform(7, 3);
        auto back = std::get<Waveform>(decode_one(encode(w)));
        EXPECT_EQ(back.head.flags, w.head.flags);
        EXPECT_EQ(back.head.time_stamp, w.head.time_stamp);
        EXPECT_EQ(back.head.waveform_id, w.head.waveform_id);
        EXPECT_EQ(back.head.sample_time_us, w.head.sample_time_us);
        EXPECT_EQ(back.data, w.data);
    }
    for (uint16_t type = 1; type <= 8; ++type) {
        Image im = make_image(type, 3, 2, 2, 2, kMeta);
        auto back = std::get<Image>(decode_one(encode(im)));
        EXPECT_EQ(0, std::memcmp(&back.head, &im.head, sizeof im.head)) << "data_type " << type;
        EXPECT_EQ(back.meta, kMeta);
        EXPECT_EQ(back.pixels, im.pixels);
    }
    {
        auto q = std::get<Query>(decode_one(encode(Query{5, 1234567890123ull, "gadgetron::info"})));
        EXPECT_EQ(q.reserved, 5u);
        EXPECT_EQ(q.correlation_id, 1234567890123ull);
        EXPECT_EQ(q.key, "gadgetron::info");
    }
    {
        DicomWithName d{{9, 8, 7, 0}, "x.dcm", "<meta/>"};
        auto back = std::get<DicomWithName>(decode_one(encode(d)));
        EXPECT_EQ(back.dicom, d.dicom);
        EXPECT_EQ(back.filename, d.filename);
        EXPECT_EQ(back.meta_xml, d.meta_xml);
    }
    EXPECT_EQ(std::get<ConfigFile>(decode_one(encode(ConfigFile{""}))).name, "");
    std::string longest(1023, 'n');
    EXPECT_EQ(std::get<ConfigFile>(decode_one(encode(ConfigFile{longest}))).name, longest);
    std::string binary("a\0b\xff", 4);
    EXPECT_EQ(std::get<Text>(decode_one(encode(Text{binary}))).text, binary);
}

// Gadgetron's clients count the C string's NUL in script lengths: accepted, and the text ends before it.
TEST(WireRoundTrip, ScriptsWithTrailingNulAreAccepted) {
    const std::string xml = "<ismrmrdHeader/>";
    auto with_nul = [&](uint16_t id) {
        return Bytes().u16(id).u32(static_cast<uint32_t>(xml.size() + 1)).str(xml).pod<char>(0).b;
    };
    EXPECT_EQ(std::get<ParameterScript>(decode_one(with_nul(3))).xml, xml);
    EXPECT_EQ(std::get<ConfigScript>(decode_one(with_nul(2))).text, xml);
    EXPECT_EQ(std::get<Text>(decode_one(with_nul(5))).text, xml);
    EXPECT_EQ(std::get<Query>(decode_one(Bytes().u16(6).u64(0).u64(3).u64(4).str("key").pod<char>(0).b)).key, "key");
}

// Gadgetron 3.x and >= 4.5 count a NUL in the meta length: accepted, stripped, and not sent back.
TEST(WireRoundTrip, ImageMetaWithAndWithoutTrailingNul) {
    Image im = make_image(5, 2, 1, 1, 1, kMeta);
    ISMRMRD::ISMRMRD_ImageHeader h = im.head;
    h.attribute_string_len = static_cast<uint32_t>(kMeta.size() + 1);
    std::vector<uint8_t> with_nul =
        Bytes().u16(1022).raw(&h, 198).u64(kMeta.size() + 1).str(kMeta).pod<char>('\0').raw(im.pixels.data(), 8).b;
    auto back = std::get<Image>(decode_one(with_nul));
    EXPECT_EQ(back.meta, kMeta);
    EXPECT_EQ(uint32_t{back.head.attribute_string_len}, kMeta.size());  // copied: the header is packed
    EXPECT_EQ(back.pixels, im.pixels);
    EXPECT_EQ(encode(back), encode(im));  // re-encoded without the NUL

    // An image whose meta string still ends in NUL is sent with the exact length of the text.
    Image nul_meta = im;
    nul_meta.meta.push_back('\0');
    EXPECT_EQ(encode(nul_meta), encode(im));

    // attribute_string_len always follows the meta that is sent, whatever the header held.
    Image stale = im;
    stale.head.attribute_string_len = 9999;
    EXPECT_EQ(encode(stale), encode(im));

    // Empty meta: length 0, no bytes.
    Image empty = make_image(5, 2, 1, 1, 1, "");
    auto e = std::get<Image>(decode_one(encode(empty)));
    EXPECT_EQ(e.meta, "");
    EXPECT_EQ(uint32_t{e.head.attribute_string_len}, 0u);
}

// ---------------------------------------------------------------------------------------------------
// Malformed streams

TEST(WireMalformed, CleanEndBeforeAnIdIsEndOfStream) {
    MemoryReader in({});
    EXPECT_THROW(read_message(in, Limits{}), EndOfStream);
    // After a whole message, the next read is a clean end too.
    MemoryReader one(encode(Close{}));
    EXPECT_TRUE(std::holds_alternative<Close>(read_message(one, Limits{})));
    EXPECT_THROW(read_message(one, Limits{}), EndOfStream);
}

TEST(WireMalformed, UnknownIdIsNamed) {
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(4242).u64(0).b), "unknown message id 4242");
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(0).b), "unknown message id 0");
    // Ids of the MRD protocol that Larmor does not speak are unknown too, not misread.
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(1020).b), "unknown message id 1020");
}

TEST(WireMalformed, TruncatedAtEveryCutPointOfEveryMessage) {
    for (const WireMessage& msg : one_of_each()) {
        const std::vector<uint8_t> bytes = encode(msg);
        const std::string name = id_name(static_cast<uint16_t>(bytes[0] | (bytes[1] << 8)));
        const std::string bare = name.substr(0, name.find('('));
        for (size_t cut = 1; cut < bytes.size(); ++cut) {
            std::vector<uint8_t> part(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
            std::string what = error_of<ProtocolError>(part);
            if (cut == 1) {
                EXPECT_EQ(what.rfind("truncated message id", 0), 0u) << what;
            } else {
                EXPECT_EQ(what.rfind("truncated " + bare + " message: ", 0), 0u) << "cut " << cut << ": " << what;
            }
        }
    }
}

TEST(WireMalformed, TruncationNamesThePartThatWasCut) {
    std::vector<uint8_t> bytes = encode(make_acquisition(16, 2, 0));
    bytes.resize(2 + 340 + 10);
    EXPECT_EQ(error_of<ProtocolError>(bytes),
              "truncated ACQUISITION message: stream ended in data (256 bytes expected): end of stream after 10 of "
              "256 bytes");
    bytes.resize(2 + 100);
    EXPECT_NE(error_of<ProtocolError>(bytes).find("stream ended in header (340 bytes expected)"), std::string::npos);
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(5).u32(10).str("abc").b),
              "truncated TEXT message: stream ended in text (10 bytes expected): end of stream after 3 of 10 bytes");
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(6).u64(0).u32(7).b),
              "truncated QUERY message: stream ended in correlation_id (8 bytes expected): end of stream after 4 of "
              "8 bytes");
}

// A data block larger than one read chunk (16 MiB) that is cut: the error names the size the header
// declared (4096 samples x 1024 channels = 32 MiB), not the chunk being read when the stream ended.
TEST(WireMalformed, TruncationOfALargePartNamesItsDeclaredSize) {
    std::vector<uint8_t> bytes = encode(make_acquisition(4096, 1024, 0));
    bytes.resize(2 + 340 + (size_t{20} << 20));
    const std::string what = error_of<ProtocolError>(bytes);
    EXPECT_EQ(what.rfind("truncated ACQUISITION message: stream ended in data (33554432 bytes expected, 16777216 "
                         "received before this read): end of stream after 4194304 of 16777216 bytes",
                         0),
              0u)
        << what;
}

// Builds a stream holding only an acquisition header: any attempt to read on would be a truncation, so
// a limit error proves the check came first.
std::vector<uint8_t> acquisition_header_only(uint16_t samples, uint16_t channels, uint16_t traj_dims,
                                             uint64_t flags = 0) {
    Acquisition a = make_acquisition(0, 0, 0);
    a.head.number_of_samples = samples;
    a.head.active_channels = channels;
    a.head.trajectory_dimensions = traj_dims;
    a.head.flags = flags;
    return Bytes().u16(1008).raw(&a.head, 340).b;
}

TEST(WireMalformed, AbsurdAcquisitionSizesAreRejectedBeforeAllocating) {
    Limits limits;
    AllocationProbe probe;
    EXPECT_EQ(error_of<ProtocolError>(acquisition_header_only(128, 5000, 0), limits),
              "ACQUISITION: active_channels 5000 exceeds the limit 1024");
    EXPECT_EQ(error_of<ProtocolError>(acquisition_header_only(128, 8, 7), limits),
              "ACQUISITION: trajectory_dimensions 7 exceeds the limit 4");
    Limits small;
    small.max_samples = 4096;
    EXPECT_EQ(error_of<ProtocolError>(acquisition_header_only(65535, 8, 0), small),
              "ACQUISITION: number_of_samples 65535 exceeds the limit 4096");
    small.max_channels = 32;
    EXPECT_EQ(error_of<ProtocolError>(acquisition_header_only(256, 33, 0), small),
              "ACQUISITION: active_channels 33 exceeds the limit 32");
    EXPECT_LT(probe.largest(), size_t{64} << 10);
}

TEST(WireMalformed, AbsurdWaveformSizesAreRejected) {
    Waveform w = make_waveform(0, 0);
    w.head.channels = 4000;
    w.head.number_of_samples = 10;
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(1026).raw(&w.head, 40).b),
              "WAVEFORM: channels 4000 exceeds the limit 1024");
    Limits small;
    small.max_samples = 100;
    w.head.channels = 1;
    w.head.number_of_samples = 101;
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(1026).raw(&w.head, 40).b, small),
              "WAVEFORM: number_of_samples 101 exceeds the limit 100");
}

TEST(WireMalformed, AbsurdTextLengthsAreRejectedBeforeAllocating) {
    AllocationProbe probe;
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(5).u32(0xFFFFFFFFu).b),
              "TEXT: length 4294967295 exceeds the limit 67108864");
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(2).u32(0x7FFFFFFFu).b),
              "CONFIG_SCRIPT: length 2147483647 exceeds the limit 67108864");
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(3).u32(100000000u).b),
              "PARAMETER_SCRIPT: length 100000000 exceeds the limit 67108864");
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(6).u64(0).u64(1).u64(1ull << 62).b),
              "QUERY: key length 4611686018427387904 exceeds the limit 67108864");
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(7).u64(1).u64(~0ull).b),
              "RESPONSE: text length 18446744073709551615 exceeds the limit 67108864");
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(1019).u64(1ull << 40).b),
              "DEPENDENCY_QUERY: length 1099511627776 exceeds the limit 67108864");
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(1018).u32(0xFFFFFFFFu).b),
              "DICOM_WITHNAME: DICOM length 4294967295 exceeds the limit 2147483648");
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(1018).u32(0).u64(1ull << 50).b),
              "DICOM_WITHNAME: file name length 1125899906842624 exceeds the limit 67108864");
    Limits small;
    small.max_text_bytes = 10;
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(5).u32(11).str("01234567890").b, small),
              "TEXT: length 11 exceeds the limit 10");
    EXPECT_EQ(std::get<Text>(decode_one(Bytes().u16(5).u32(10).str("0123456789").b, small)).text, "0123456789");
    EXPECT_LT(probe.largest(), size_t{64} << 10);
}

TEST(WireMalformed, AbsurdImageSizesAreRejectedBeforeAllocating) {
    AllocationProbe probe;
    // 65535^3 complex-double pixels times 65535 channels overflows 64 bits.
    Image huge = make_image(8, 1, 1, 1, 1, "");
    huge.head.matrix_size[0] = huge.head.matrix_size[1] = huge.head.matrix_size[2] = 65535;
    huge.head.channels = 65535;
    EXPECT_NE(error_of<ProtocolError>(Bytes().u16(1022).raw(&huge.head, 198).u64(0).b).find("overflows 64 bits"),
              std::string::npos);

    Image big = make_image(7, 1, 1, 1, 1, "");
    big.head.matrix_size[0] = 4096;
    big.head.matrix_size[1] = 4096;
    big.head.matrix_size[2] = 256;
    big.head.channels = 4;
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(1022).raw(&big.head, 198).u64(0).b),
              "IMAGE: pixel data 137438953472 bytes (matrix 4096x4096x256, 4 channels, data_type 7) exceeds the "
              "limit 2147483648");

    Image ok = make_image(5, 2, 2, 1, 1, "");
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(1022).raw(&ok.head, 198).u64(1ull << 33).b),
              "IMAGE: attribute length 8589934592 exceeds the limit 67108864");
    Limits small;
    small.max_image_bytes = 15;
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(1022).raw(&ok.head, 198).u64(0).b, small),
              "IMAGE: pixel data 16 bytes (matrix 2x2x1, 1 channels, data_type 5) exceeds the limit 15");
    EXPECT_LT(probe.largest(), size_t{64} << 10);
}

// An IMAGE within the limits that announces 1 GiB of pixels and then ends: the decoder allocates as the
// bytes arrive (one 16 MiB read chunk at most), never the announced size (found by fuzzing).
TEST(WireMalformed, TruncatedLargeImageAllocatesAtMostOneChunk) {
    Image big = make_image(5, 1, 1, 1, 1, "");
    big.head.matrix_size[0] = 16384;
    big.head.matrix_size[1] = 16384;
    AllocationProbe probe;
    const std::string error = error_of<ProtocolError>(Bytes().u16(1022).raw(&big.head, 198).u64(0).u32(7).b);
    EXPECT_NE(error.find("truncated IMAGE message: stream ended in pixel data"), std::string::npos) << error;
    EXPECT_LE(probe.largest(), size_t{16} << 20);
}

TEST(WireMalformed, UnknownImageDataTypeIsRejected) {
    for (uint16_t type : {0, 9, 0xFFFF}) {
        Image im = make_image(5, 2, 2, 1, 1, "");
        im.head.data_type = type;
        EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(1022).raw(&im.head, 198).u64(0).b),
                  "IMAGE: unknown data_type " + std::to_string(type) + " (expected 1..8)");
    }
}

// An acquisition as gadgetron_ismrmrd_client -P/-T sends it: flag 54 in the header, the trajectory
// as usual, then u32 n and an n-byte NHLBI buffer instead of the samples.
std::vector<uint8_t> compressed_acquisition(const Acquisition& a, uint64_t flags, const std::vector<uint8_t>& block) {
    ISMRMRD::ISMRMRD_AcquisitionHeader h = a.head;
    h.flags |= flags;
    Bytes b;
    b.u16(1008).raw(&h, 340).raw(a.traj.data(), a.traj.size() * sizeof(float));
    if (!a.data.empty()) b.u32(static_cast<uint32_t>(block.size())).raw(block.data(), block.size());
    return b.b;
}

constexpr uint64_t kZfp = uint64_t{1} << 52, kNhlbi = uint64_t{1} << 53;

std::vector<float> floats_of(const Acquisition& a) {
    const auto* f = reinterpret_cast<const float*>(a.data.data());
    return std::vector<float>(f, f + 2 * a.data.size());
}

TEST(WireCompressed, NhlbiAcquisitionIsDecodedAndItsFlagCleared) {
    const Acquisition a = make_acquisition(33, 3, 2);
    const auto enc = test::nhlbi_encode_precision(floats_of(a), 16);
    const auto got = std::get<Acquisition>(decode_one(compressed_acquisition(a, kNhlbi, enc.bytes)));
    EXPECT_EQ(uint64_t{got.head.flags}, uint64_t{a.head.flags}) << "flag 54 cleared, the others kept";
    EXPECT_EQ(got.traj, a.traj);
    ASSERT_EQ(got.data.size(), a.data.size());
    for (size_t i = 0; i < a.data.size(); ++i) {
        EXPECT_NEAR(got.data[i].real(), a.data[i].real(), enc.tolerance) << i;
        EXPECT_NEAR(got.data[i].imag(), a.data[i].imag(), enc.tolerance) << i;
    }
    // Without samples the client sends no block at all.
    const Acquisition empty = make_acquisition(0, 3, 0);
    const auto e = std::get<Acquisition>(decode_one(compressed_acquisition(empty, kNhlbi, {})));
    EXPECT_TRUE(e.data.empty());
    EXPECT_EQ(uint64_t{e.head.flags} & kNhlbi, 0u);
}

// A refused acquisition is read to its end: the next message decodes.
void expect_rejected_then_close(const std::vector<uint8_t>& acquisition, const std::string& expected) {
    std::vector<uint8_t> stream = acquisition;
    const auto close = encode(Close{});
    stream.insert(stream.end(), close.begin(), close.end());
    MemoryReader in(stream);
    try {
        read_message(in, Limits{});
        ADD_FAILURE() << "accepted; expected: " << expected;
    } catch (const RejectedMessage& e) {
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(in.position(), acquisition.size()) << expected;
    EXPECT_TRUE(std::holds_alternative<Close>(read_message(in, Limits{}))) << expected;
}

TEST(WireCompressed, UndecodableDataIsRejectedWithTheStreamStillFramed) {
    const Acquisition a = make_acquisition(16, 2, 0);
    const auto good = test::nhlbi_encode_precision(floats_of(a), 12).bytes;
    expect_rejected_then_close(compressed_acquisition(a, kZfp, std::vector<uint8_t>(57, 0xAB)),
                               "ZFP-compressed data (flag 53) is not supported");
    expect_rejected_then_close(compressed_acquisition(a, kZfp | kNhlbi, good), "together with NHLBI flag 54");
    auto short_block = good;
    short_block.pop_back();
    expect_rejected_then_close(compressed_acquisition(a, kNhlbi, short_block), "need 13 + 96");
    auto bad_bits = good;
    bad_bits[12] = 40;
    expect_rejected_then_close(compressed_acquisition(a, kNhlbi, bad_bits), "bits 40 outside 1..31");
    const Acquisition other = make_acquisition(8, 2, 0);
    expect_rejected_then_close(compressed_acquisition(other, kNhlbi, good),
                               "holds 64 floats, the acquisition header says 32");
}

TEST(WireCompressed, OversizedBlockIsDrainedWithoutAllocatingIt) {
    const Acquisition a = make_acquisition(16, 2, 0);
    const std::vector<uint8_t> huge(size_t{40} << 20, 0);  // 40 MiB for 64 floats
    MemoryReader in(compressed_acquisition(a, kNhlbi, huge));
    AllocationProbe probe;
    try {
        read_message(in, Limits{});
        ADD_FAILURE() << "accepted";
    } catch (const RejectedMessage& e) {
        EXPECT_NE(std::string(e.what()).find("compressed data length 41943040 exceeds the 261 bytes"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(in.remaining(), 0u);
    EXPECT_LE(probe.largest(), size_t{1} << 20);
}

TEST(WireCompressed, TruncatedCompressedDataLosesTheFraming) {
    const Acquisition a = make_acquisition(16, 2, 0);
    auto bytes = compressed_acquisition(a, kNhlbi, test::nhlbi_encode_precision(floats_of(a), 12).bytes);
    bytes.resize(bytes.size() - 5);
    EXPECT_NE(error_of<ProtocolError>(bytes).find("truncated ACQUISITION message: stream ended in compressed data"),
              std::string::npos);
}

TEST(WireCompressed, EncodingCompressedAcquisitionsIsRefused) {
    // An Acquisition holds plain samples; a compression flag on one to be sent would misframe it.
    Acquisition a = make_acquisition(2, 1, 0);
    for (uint64_t flag : {kZfp, kNhlbi}) {
        a.head.flags = flag;
        EXPECT_THROW(encode(a), std::invalid_argument);
    }
    // Flags 55/56 are not compression schemes Gadgetron uses: decoded normally.
    a.head.flags = (uint64_t{1} << 54) | (uint64_t{1} << 55);
    EXPECT_EQ(uint64_t{std::get<Acquisition>(decode_one(encode(a))).head.flags}, uint64_t{a.head.flags});
}

TEST(WireMalformed, ConfigNameWithoutNulIsRejected) {
    std::vector<uint8_t> name(1024, 'a');
    EXPECT_EQ(error_of<ProtocolError>(Bytes().u16(1).raw(name.data(), name.size()).b),
              "CONFIG_FILE: name is not NUL-terminated within 1024 bytes");
    // A NUL in the last byte is fine; bytes after the first NUL are ignored.
    name[1023] = '\0';
    name[3] = '\0';
    EXPECT_EQ(std::get<ConfigFile>(decode_one(Bytes().u16(1).raw(name.data(), name.size()).b)).name, "aaa");
}

// ---------------------------------------------------------------------------------------------------
// Outgoing messages that cannot be framed are refused, and nothing is written

TEST(WireEncode, InconsistentMessagesAreRefusedWithoutWriting) {
    auto refused = [](const WireMessage& m) {
        MemoryWriter out;
        EXPECT_THROW(write_message(out, m), std::invalid_argument);
        EXPECT_TRUE(out.bytes().empty());
    };
    Acquisition a = make_acquisition(4, 2, 0);
    a.data.pop_back();
    refused(a);
    Acquisition t = make_acquisition(4, 2, 2);
    t.traj.push_back(1.f);
    refused(t);
    Acquisition c = make_acquisition(4, 2, 0);
    c.head.flags |= uint64_t{1} << 52;
    refused(c);
    Image im = make_image(5, 2, 2, 1, 1, "");
    im.pixels.push_back(0);
    refused(im);
    Image bad_type = make_image(5, 2, 2, 1, 1, "");
    bad_type.head.data_type = 12;
    refused(bad_type);
    Waveform w = make_waveform(3, 1);
    w.data.clear();
    refused(w);
    refused(ConfigFile{std::string(1024, 'x')});
    refused(ConfigFile{std::string("a\0b", 3)});
}

TEST(WireNames, IdNames) {
    EXPECT_EQ(id_name(1008), "ACQUISITION(1008)");
    EXPECT_EQ(id_name(1022), "IMAGE(1022)");
    EXPECT_EQ(id_name(1026), "WAVEFORM(1026)");
    EXPECT_EQ(id_name(1018), "DICOM_WITHNAME(1018)");
    EXPECT_EQ(id_name(1019), "DEPENDENCY_QUERY(1019)");
    EXPECT_EQ(id_name(1), "CONFIG_FILE(1)");
    EXPECT_EQ(id_name(2), "CONFIG_SCRIPT(2)");
    EXPECT_EQ(id_name(3), "PARAMETER_SCRIPT(3)");
    EXPECT_EQ(id_name(4), "CLOSE(4)");
    EXPECT_EQ(id_name(5), "TEXT(5)");
    EXPECT_EQ(id_name(6), "QUERY(6)");
    EXPECT_EQ(id_name(7), "RESPONSE(7)");
    EXPECT_EQ(id_name(4242), "unknown(4242)");
    for (const WireMessage& msg : one_of_each()) {
        const std::vector<uint8_t> bytes = encode(msg);
        EXPECT_EQ(message_id(msg), bytes[0] | (bytes[1] << 8));
    }
}

// The sample pool (wire/sample_pool.h): a freed acquisition's block is the next one of its size, also
// when another thread frees it; sizes outside its range and bytes beyond its bound are not kept.
TEST(SamplePool, ReusesFreedBlocksOfTheSameSizeWithinItsBound) {
    const size_t acquisition = 32 * 512;  // 128 KiB of samples
    const size_t held0 = wire::pool_held_bytes();
    const void* first = nullptr;
    {
        wire::Samples a(acquisition);
        first = a.data();
    }
    EXPECT_EQ(wire::pool_held_bytes(), held0 + acquisition * sizeof(std::complex<float>));
    {
        wire::Samples b(acquisition);
        EXPECT_EQ(b.data(), first) << "the freed block was not reused";
        EXPECT_EQ(wire::pool_held_bytes(), held0);
        // Freed on another thread (the chain's), taken again on this one (the reader's).
        std::thread([v = std::move(b)]() mutable { v = wire::Samples(); }).join();
    }
    {
        wire::Samples c(acquisition);
        EXPECT_EQ(c.data(), first) << "a block freed by another thread was not reused";
        wire::Samples other(acquisition + 1);  // another size: a block of its own
        EXPECT_NE(other.data(), c.data());
    }
    // Small and huge vectors bypass the pool.
    const size_t held1 = wire::pool_held_bytes();
    { wire::Samples small(16); wire::Samples huge((wire::kPoolMaxBlock / sizeof(std::complex<float>)) + 1); }
    EXPECT_EQ(wire::pool_held_bytes(), held1);
    // The bound: more freed blocks than it holds leave it at most full.
    {
        std::vector<wire::Samples> many;
        for (size_t i = 0; i < 2 * wire::kPoolBytes / (acquisition * sizeof(std::complex<float>)); ++i)
            many.emplace_back(acquisition);
    }
    EXPECT_LE(wire::pool_held_bytes(), wire::kPoolBytes);
    EXPECT_GT(wire::pool_held_bytes(), wire::kPoolBytes / 2);
    // A full pool still takes the next stream's size, dropping its oldest blocks.
    const void* next = nullptr;
    {
        wire::Samples d(acquisition + 2);
        next = d.data();
    }
    EXPECT_LE(wire::pool_held_bytes(), wire::kPoolBytes);
    wire::Samples e(acquisition + 2);
    EXPECT_EQ(e.data(), next) << "a full pool kept out a new size";
}

}  // namespace
}  // namespace larmor

// The door's and ImageFinish's checks: every kind of non-finite value found wherever it sits (also in a
// vectorised loop's remainder), signed zeros are zero, the smallest subnormal is not.
TEST(FloatChecks, FindNonFiniteValuesAndNonzeroOnes) {
    namespace wire = larmor::wire;
    const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::signaling_NaN()};
    for (size_t n : {size_t{1}, size_t{7}, size_t{64}, size_t{1027}}) {
        std::vector<float> v(n, 0.f);
        v[n / 2] = -0.f;
        wire::FloatSummary s = wire::summarize_floats(v.data(), n);
        EXPECT_TRUE(s.all_finite) << n;
        EXPECT_FALSE(s.any_nonzero) << n;
        v[n - 1] = std::numeric_limits<float>::denorm_min();
        s = wire::summarize_floats(v.data(), n);
        EXPECT_TRUE(s.all_finite && s.any_nonzero) << n;
        EXPECT_TRUE(wire::all_finite(v.data(), n)) << n;
        v[n - 1] = -std::numeric_limits<float>::max();
        EXPECT_TRUE(wire::all_finite(v.data(), n)) << n;
        for (float x : specials)
            for (size_t at : {size_t{0}, n / 2, n - 1}) {
                std::vector<float> w(n, 1.f);
                w[at] = x;
                EXPECT_FALSE(wire::summarize_floats(w.data(), n).all_finite) << x << " at " << at << " of " << n;
                EXPECT_FALSE(wire::all_finite(w.data(), n)) << x << " at " << at << " of " << n;
            }
    }
    EXPECT_TRUE(wire::summarize_floats(nullptr, 0).all_finite);
    EXPECT_FALSE(wire::summarize_floats(nullptr, 0).any_nonzero);
}
