// Gadgetron / MRD streaming wire protocol: encode and decode of every message (../shared/docs/protocol.md).
//
// Decoding never trusts a length field: every variable-length part is checked against Limits before
// anything is allocated, and large blocks are read in chunks into memory that grows (geometrically) with
// what has arrived, so a peer that announces a large message and then stops sending costs us only what it
// actually sent: neither touched memory nor address space for the announced size.
#include "wire/codec.h"

#include "wire/nhlbi.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>

namespace larmor::wire {

// The wire is little-endian and structs go on it byte-for-byte, so the host must be little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire codec assumes a little-endian host");
// The ISMRMRD 1.8 C structs (packed to 2 bytes, except the waveform header) are exactly the wire images.
static_assert(sizeof(ISMRMRD::ISMRMRD_AcquisitionHeader) == kAcquisitionHeaderBytes, "AcquisitionHeader size");
static_assert(sizeof(ISMRMRD::ISMRMRD_ImageHeader) == kImageHeaderBytes, "ImageHeader size");
static_assert(sizeof(ISMRMRD::ISMRMRD_WaveformHeader) == kWaveformHeaderBytes, "WaveformHeader size");
static_assert(std::is_trivially_copyable_v<ISMRMRD::ISMRMRD_AcquisitionHeader> &&
                  std::is_trivially_copyable_v<ISMRMRD::ISMRMRD_ImageHeader> &&
                  std::is_trivially_copyable_v<ISMRMRD::ISMRMRD_WaveformHeader>,
              "headers are copied with memcpy");
static_assert(sizeof(std::complex<float>) == 8, "complex64 on the wire");

namespace {

// ISMRMRD_ACQ_COMPRESSION1/2. With either set, gadgetron_ismrmrd_client replaces the data block by
// `u32 n` + n bytes, and sends neither when the acquisition has no samples.
constexpr int kFlagCompression1 = 53;  // ZFP-compressed acquisition data
constexpr int kFlagCompression2 = 54;  // NHLBI-compressed acquisition data (wire/nhlbi.h)

// Big payloads are read this much at a time (see the file comment).
constexpr size_t kReadChunkBytes = size_t{16} << 20;
// Refused payloads are dropped through a buffer of at most this size.
constexpr size_t kSkipChunkBytes = size_t{1} << 20;

const char* bare_name(uint16_t id) {
    switch (id) {
        case kConfigFile: return "CONFIG_FILE";
        case kConfigScript: return "CONFIG_SCRIPT";
        case kParameterScript: return "PARAMETER_SCRIPT";
        case kClose: return "CLOSE";
        case kText: return "TEXT";
        case kQuery: return "QUERY";
        case kResponse: return "RESPONSE";
        case kAcquisition: return "ACQUISITION";
        case kDicomWithName: return "DICOM_WITHNAME";
        case kDependencyQuery: return "DEPENDENCY_QUERY";
        case kImage: return "IMAGE";
        case kWaveform: return "WAVEFORM";
        default: return nullptr;
    }
}

std::string num(uint64_t v) { return std::to_string(v); }

// Bytes per pixel of an ISMRMRD image data_type, 0 for an unknown type.
size_t pixel_bytes(uint16_t data_type) {
    switch (data_type) {
        case 1: case 2: return 2;   // ushort, short
        case 3: case 4: return 4;   // uint, int
        case 5: return 4;           // float
        case 6: return 8;           // double
        case 7: return 8;           // complex float
        case 8: return 16;          // complex double
        default: return 0;
    }
}

bool flag_set(uint64_t flags, int flag) { return (flags >> (flag - 1)) & 1u; }

// a*b*... with overflow detection; false when the product does not fit in 64 bits.
bool checked_product(std::initializer_list<uint64_t> factors, uint64_t& out) {
    uint64_t p = 1;
    for (uint64_t f : factors)
        if (__builtin_mul_overflow(p, f, &p)) return false;
    out = p;
    return true;
}

// Pixel bytes an image header announces; throws ProtocolError on an unknown data type or overflow.
uint64_t image_pixel_bytes(const ISMRMRD::ISMRMRD_ImageHeader& h) {
    size_t elem = pixel_bytes(h.data_type);
    if (elem == 0) throw ProtocolError("IMAGE: unknown data_type " + num(h.data_type) + " (expected 1..8)");
    uint64_t bytes = 0;
    if (!checked_product({h.matrix_size[0], h.matrix_size[1], h.matrix_size[2], h.channels, elem}, bytes))
        throw ProtocolError("IMAGE: pixel data size of matrix " + num(h.matrix_size[0]) + "x" + num(h.matrix_size[1]) +
                            "x" + num(h.matrix_size[2]) + " with " + num(h.channels) + " channels overflows 64 bits");
    return bytes;
}

std::string describe_matrix(const ISMRMRD::ISMRMRD_ImageHeader& h) {
    return "matrix " + num(h.matrix_size[0]) + "x" + num(h.matrix_size[1]) + "x" + num(h.matrix_size[2]) + ", " +
           num(h.channels) + " channels, data_type " + num(h.data_type);
}

void strip_trailing_nuls(std::string& s) {
    while (!s.empty() && s.back() == '\0') s.pop_back();
}

void check_limit(const char* msg, const char* what, uint64_t value, uint64_t limit) {
    if (value > limit)
        throw ProtocolError(std::string(msg) + ": " + what + " " + num(value) + " exceeds the limit " + num(limit));
}

// ---------------------------------------------------------------------------------------------------
// Decoding

// Reads the parts of one message whose id is already known, turning an end of stream inside it into
// a ProtocolError that names the message and the part (the peer broke the framing).
class MessageReader {
public:
    MessageReader(ByteReader& in, uint16_t id, const char* name, PayloadGate* gate)
        : in_(in), id_(id), name_(name), gate_(gate) {}

    // Asks the gate about a payload of `bytes` (see PayloadGate); true: read it. false: the caller
    // skips the whole rest of the message, then calls end_skip(), which throws for a refusal.
    bool keep(uint64_t bytes, const ISMRMRD::ISMRMRD_AcquisitionHeader* acquisition = nullptr) {
        if (!gate_) return true;
        PayloadVerdict v = gate_->admit(PayloadInfo{id_, bytes, acquisition});
        if (v.kind == PayloadVerdict::Keep) return true;
        if (v.kind == PayloadVerdict::Refuse) refusal_ = std::move(v.reason);
        refused_ = v.kind == PayloadVerdict::Refuse;
        skipped_ = true;
        return false;
    }
    void end_skip() {
        if (refused_) throw RejectedMessage(id_, refusal_);
    }
    bool skipped() const { return skipped_; }

    void bytes(void* dst, size_t n, const char* part) { bytes_of_part(dst, n, part, n, 0); }

    // Reads n bytes of a part that is `declared` bytes long, of which `before` were read already (a
    // large part arrives in chunks): a truncation names the size the message declared, not the chunk.
    void bytes_of_part(void* dst, size_t n, const char* part, uint64_t declared, uint64_t before) {
        try {
            in_.read_exact(dst, n);
        } catch (const EndOfStream& e) {
            throw ProtocolError(std::string("truncated ") + name_ + " message: stream ended in " + part + " (" +
                                num(declared) + " bytes expected" +
                                (before ? ", " + num(before) + " received before this read" : std::string()) +
                                "): " + e.what());
        }
    }

    template <typename T>
    T pod(const char* part) {
        static_assert(std::is_trivially_copyable_v<T>);
        T v;
        bytes(&v, sizeof v, part);
        return v;
    }

    // Reads count elements into a vector or string, allocating only as bytes arrive (see the file
    // comment). Reserving all of `count` up front (as this once did) let a few bytes of IMAGE header
    // reserve 2 GiB of address space per message (found by fuzzing, tests/corpus/wire_session/).
    template <typename Container>
    void vector(Container& out, uint64_t count, const char* part) {
        using T = typename Container::value_type;
        static_assert(std::is_trivially_copyable_v<T>);
        out.clear();
        const size_t chunk = std::max<size_t>(1, kReadChunkBytes / sizeof(T));
        while (out.size() < count) {
            size_t done = out.size();
            size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, count - done));
            // Doubling, capped at count: copies stay below count in total and nothing is over-allocated.
            if (out.capacity() < done + n)
                out.reserve(static_cast<size_t>(std::min<uint64_t>(count, std::max<uint64_t>(2 * out.capacity(), done + n))));
            {
                // Samples: the socket writes every new element next, so they are not zeroed first
                // (wire/samples.h); other containers value-initialise as usual.
                const UninitialisedResize unwritten;
                out.resize(done + n);
            }
            bytes_of_part(out.data() + done, n * sizeof(T), part, count * sizeof(T), done * sizeof(T));
        }
    }

    // Reads and drops n bytes (a message being refused) through a bounded scratch buffer.
    void skip(uint64_t n, const char* part) {
        std::vector<uint8_t> scratch(static_cast<size_t>(std::min<uint64_t>(n, kSkipChunkBytes)));
        while (n > 0) {
            const size_t k = static_cast<size_t>(std::min<uint64_t>(n, scratch.size()));
            bytes(scratch.data(), k, part);
            n -= k;
        }
    }

    std::string string(uint64_t len, const char* part) {
        std::string s;
        vector(s, len, part);
        return s;
    }

    // u32 or u64 length prefix (named `what` in errors), bounded, then that many bytes (named `part`).
    // Gadgetron's clients send scripts with the C string's NUL counted in the length; the text ends
    // before it, so trailing NULs are dropped (as for image meta).
    // A string the gate does not keep comes back empty, its bytes dropped (skipped()); the caller
    // calls end_skip() once the message is read to its end.
    template <typename LenT>
    std::string sized_string(uint64_t limit, const char* what, const char* part) {
        uint64_t len = pod<LenT>(what);
        check_limit(name_, what, len, limit);
        if (!keep(len)) {
            skip(len, part);
            return {};
        }
        std::string s = string(len, part);
        strip_trailing_nuls(s);
        return s;
    }

private:
    ByteReader& in_;
    uint16_t id_;
    const char* name_;
    PayloadGate* gate_;
    bool skipped_ = false, refused_ = false;
    std::string refusal_;
};

ConfigFile read_config_file(MessageReader& r) {
    char buf[kConfigFileNameBytes];
    r.bytes(buf, sizeof buf, "config name");
    const void* nul = std::memchr(buf, '\0', sizeof buf);
    if (!nul)
        throw ProtocolError("CONFIG_FILE: name is not NUL-terminated within " + num(kConfigFileNameBytes) + " bytes");
    return ConfigFile{std::string(buf, static_cast<size_t>(static_cast<const char*>(nul) - buf))};
}

Query read_query(MessageReader& r, const Limits& limits) {
    Query q;
    q.reserved = r.pod<uint64_t>("reserved");
    q.correlation_id = r.pod<uint64_t>("correlation_id");
    q.key = r.sized_string<uint64_t>(limits.max_text_bytes, "key length", "key");
    return q;
}

Response read_response(MessageReader& r, const Limits& limits) {
    Response resp;
    resp.correlation_id = r.pod<uint64_t>("correlation_id");
    resp.text = r.sized_string<uint64_t>(limits.max_text_bytes, "text length", "text");
    return resp;
}

// "ACQUISITION (scan_counter 12, 384 samples x 14 channels)", for errors about one acquisition.
std::string describe_acquisition(const ISMRMRD::ISMRMRD_AcquisitionHeader& h) {
    return "ACQUISITION (scan_counter " + num(h.scan_counter) + ", " + num(h.number_of_samples) + " samples x " +
           num(h.active_channels) + " channels)";
}

// The compressed data block of an acquisition whose header says flag 53 and/or 54. Whatever is
// refused is refused only after the whole block has been read (RejectedMessage: still framed).
void read_compressed_data(MessageReader& r, Acquisition& acq) {
    auto& h = acq.head;
    const uint64_t samples = uint64_t{h.number_of_samples} * h.active_channels;
    const bool zfp = flag_set(h.flags, kFlagCompression1);
    const bool nhlbi = flag_set(h.flags, kFlagCompression2);
    const uint64_t clear = ~((uint64_t{1} << (kFlagCompression1 - 1)) | (uint64_t{1} << (kFlagCompression2 - 1)));
    if (samples == 0) {  // no block follows (see kFlagCompression1)
        h.flags &= clear;
        return;
    }
    const uint64_t n = r.pod<uint32_t>("compressed data length");
    if (zfp) {
        r.skip(n, "compressed data");
        throw RejectedMessage(kAcquisition, describe_acquisition(h) + ": ZFP-compressed data (flag 53" +
                              std::string(nhlbi ? " together with NHLBI flag 54" : "") +
                              ") is not supported; Larmor decodes NHLBI compression (flag 54: gadgetron_ismrmrd_client "
                              "-P or -T without -Z) and plain data. Its " + num(n) + " compressed bytes were dropped");
    }
    // Two floats per complex sample; both factors are bounded by Limits, so no overflow.
    const uint64_t floats = 2 * samples;
    const uint64_t most = nhlbi_max_buffer_bytes(floats);
    if (n > most) {
        r.skip(n, "compressed data");
        throw RejectedMessage(kAcquisition, describe_acquisition(h) + ": NHLBI compressed data length " + num(n) +
                              " exceeds the " + num(most) + " bytes any encoding of its " + num(floats) +
                              " floats can take; dropped");
    }
    std::vector<uint8_t> block;
    r.vector(block, n, "compressed data");
    // The decoded samples cost at most 32x the bytes the peer sent (1-bit integers), within Limits.
    {
        const UninitialisedResize unwritten;  // decode_nhlbi writes every float, or throws and we clear
        acq.data.resize(static_cast<size_t>(samples));
    }
    try {
        decode_nhlbi(block.data(), block.size(), floats, reinterpret_cast<float*>(acq.data.data()));
    } catch (const std::invalid_argument& e) {
        acq.data.clear();
        throw RejectedMessage(kAcquisition, describe_acquisition(h) + " with NHLBI compression (flag 54): " + e.what());
    }
    h.flags &= clear;
}

Acquisition read_acquisition(MessageReader& r, const Limits& limits) {
    Acquisition acq;
    r.bytes(&acq.head, kAcquisitionHeaderBytes, "header");
    const auto& h = acq.head;
    check_limit("ACQUISITION", "active_channels", h.active_channels, limits.max_channels);
    check_limit("ACQUISITION", "number_of_samples", h.number_of_samples, limits.max_samples);
    check_limit("ACQUISITION", "trajectory_dimensions", h.trajectory_dimensions, limits.max_trajectory_dimensions);
    // All three are uint16 and bounded above, so these products cannot overflow.
    const uint64_t traj = uint64_t{h.number_of_samples} * h.trajectory_dimensions;
    const uint64_t samples = uint64_t{h.number_of_samples} * h.active_channels;
    const bool compressed = flag_set(h.flags, kFlagCompression1) || flag_set(h.flags, kFlagCompression2);
    // A compressed block is held beside the samples it decodes to, and is at most this large.
    const uint64_t block = compressed ? nhlbi_max_buffer_bytes(2 * samples) : 0;
    if (!r.keep(traj * sizeof(float) + samples * sizeof(std::complex<float>) + block, &h)) {
        r.skip(traj * sizeof(float), "trajectory");
        if (!compressed)
            r.skip(samples * sizeof(std::complex<float>), "data");
        else if (samples > 0)  // the block's own length says how much follows (read_compressed_data)
            r.skip(r.pod<uint32_t>("compressed data length"), "compressed data");
        r.end_skip();
        return acq;
    }
    r.vector(acq.traj, traj, "trajectory");
    if (compressed)
        read_compressed_data(r, acq);
    else
        r.vector(acq.data, samples, "data");
    return acq;
}

Waveform read_waveform(MessageReader& r, const Limits& limits) {
    Waveform w;
    r.bytes(&w.head, kWaveformHeaderBytes, "header");
    check_limit("WAVEFORM", "channels", w.head.channels, limits.max_channels);
    check_limit("WAVEFORM", "number_of_samples", w.head.number_of_samples, limits.max_samples);
    const uint64_t n = uint64_t{w.head.number_of_samples} * w.head.channels;
    if (!r.keep(n * sizeof(uint32_t))) {
        r.skip(n * sizeof(uint32_t), "data");
        r.end_skip();
        return w;
    }
    r.vector(w.data, n, "data");
    return w;
}

Image read_image(MessageReader& r, const Limits& limits) {
    Image im;
    r.bytes(&im.head, kImageHeaderBytes, "header");
    // Validate the header before reading on, so a bad data type is named rather than misframed.
    uint64_t pixels = image_pixel_bytes(im.head);
    if (pixels > limits.max_image_bytes)
        throw ProtocolError("IMAGE: pixel data " + num(pixels) + " bytes (" + describe_matrix(im.head) +
                            ") exceeds the limit " + num(limits.max_image_bytes));
    uint64_t meta_len = r.pod<uint64_t>("attribute length");
    check_limit("IMAGE", "attribute length", meta_len, limits.max_meta_bytes);
    if (!r.keep(meta_len + pixels)) {
        r.skip(meta_len, "attributes");
        r.skip(pixels, "pixel data");
        r.end_skip();
        return im;
    }
    im.meta = r.string(meta_len, "attributes");
    // Gadgetron 3.x and >= 4.5 count a terminating NUL in the length; the text itself ends before it.
    strip_trailing_nuls(im.meta);
    im.head.attribute_string_len = static_cast<uint32_t>(im.meta.size());
    r.vector(im.pixels, pixels, "pixel data");
    return im;
}

DicomWithName read_dicom(MessageReader& r, const Limits& limits) {
    DicomWithName d;
    uint64_t n = r.pod<uint32_t>("DICOM length");
    check_limit("DICOM_WITHNAME", "DICOM length", n, limits.max_image_bytes);
    if (r.keep(n))
        r.vector(d.dicom, n, "DICOM bytes");
    else
        r.skip(n, "DICOM bytes");
    // The strings are asked about on their own; a refusal is thrown once the message is read to its end.
    d.filename = r.sized_string<uint64_t>(limits.max_text_bytes, "file name length", "file name");
    d.meta_xml = r.sized_string<uint64_t>(limits.max_meta_bytes, "meta length", "meta");
    r.end_skip();
    return d;
}

WireMessage read_body(uint16_t id, MessageReader& r, const Limits& limits) {
    // Messages that are one string: a skipped or refused one was read to its end by sized_string.
    auto whole = [&r](auto message) {
        r.end_skip();
        return WireMessage(std::move(message));
    };
    switch (id) {
        case kConfigFile: return read_config_file(r);
        case kConfigScript: return whole(ConfigScript{r.sized_string<uint32_t>(limits.max_text_bytes, "length", "text")});
        case kParameterScript:
            return whole(ParameterScript{r.sized_string<uint32_t>(limits.max_text_bytes, "length", "text")});
        case kClose: return Close{};
        case kText: return whole(Text{r.sized_string<uint32_t>(limits.max_text_bytes, "length", "text")});
        case kQuery: return whole(read_query(r, limits));
        case kResponse: return whole(read_response(r, limits));
        case kAcquisition: return read_acquisition(r, limits);
        case kWaveform: return read_waveform(r, limits);
        case kImage: return read_image(r, limits);
        case kDependencyQuery:
            return whole(DependencyQuery{r.sized_string<uint64_t>(limits.max_meta_bytes, "length", "text")});
        case kDicomWithName: return read_dicom(r, limits);
        default: throw ProtocolError("unknown message id " + num(id));
    }
}

// ---------------------------------------------------------------------------------------------------
// Encoding. Emit writes the message in pieces to a sink (put(const void*, size_t)), so write_message
// sends large payloads straight from the message without building a copy first. Outgoing messages that
// cannot be framed correctly are our own bug, reported as std::invalid_argument.

template <typename T, typename Put>
void put_pod(Put& put, const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put(&v, sizeof v);
}

template <typename LenT, typename Put>
void put_sized(Put& put, const std::string& s, const char* what) {
    if (s.size() > std::numeric_limits<LenT>::max())
        throw std::invalid_argument(std::string(what) + ": length " + num(s.size()) + " does not fit the length field");
    put_pod(put, static_cast<LenT>(s.size()));
    put(s.data(), s.size());
}

template <typename Put>
void emit_config_file(Put& put, const ConfigFile& m) {
    if (m.name.size() >= kConfigFileNameBytes || m.name.find('\0') != std::string::npos)
        throw std::invalid_argument("CONFIG_FILE: name of " + num(m.name.size()) +
                                    " bytes must be shorter than 1024 and contain no NUL");
    char buf[kConfigFileNameBytes] = {};
    std::memcpy(buf, m.name.data(), m.name.size());
    put(buf, sizeof buf);
}

template <typename Put>
void emit_acquisition(Put& put, const Acquisition& a) {
    const auto& h = a.head;
    if (flag_set(h.flags, kFlagCompression1) || flag_set(h.flags, kFlagCompression2))
        throw std::invalid_argument("ACQUISITION: cannot encode compressed data (flag 53/54)");
    const size_t traj = size_t{h.number_of_samples} * h.trajectory_dimensions;
    const size_t data = size_t{h.number_of_samples} * h.active_channels;
    if (a.traj.size() != traj || a.data.size() != data)
        throw std::invalid_argument("ACQUISITION: header says " + num(h.number_of_samples) + " samples, " +
                                    num(h.active_channels) + " channels, " + num(h.trajectory_dimensions) +
                                    " trajectory dimensions but holds " + num(a.traj.size()) + " trajectory and " +
                                    num(a.data.size()) + " data values");
    put(&h, kAcquisitionHeaderBytes);
    put(a.traj.data(), traj * sizeof(float));
    put(a.data.data(), data * sizeof(std::complex<float>));
}

template <typename Put>
void emit_waveform(Put& put, const Waveform& w) {
    const size_t n = size_t{w.head.number_of_samples} * w.head.channels;
    if (w.data.size() != n)
        throw std::invalid_argument("WAVEFORM: header says " + num(w.head.number_of_samples) + " samples, " +
                                    num(w.head.channels) + " channels but holds " + num(w.data.size()) + " values");
    // The header has natural alignment: zero its padding so the bytes on the wire are deterministic.
    using H = ISMRMRD::ISMRMRD_WaveformHeader;
    unsigned char buf[kWaveformHeaderBytes] = {};
    auto field = [&](size_t off, const void* src, size_t n) { std::memcpy(buf + off, src, n); };
    const H& h = w.head;
    field(offsetof(H, version), &h.version, sizeof h.version);
    field(offsetof(H, flags), &h.flags, sizeof h.flags);
    field(offsetof(H, measurement_uid), &h.measurement_uid, sizeof h.measurement_uid);
    field(offsetof(H, scan_counter), &h.scan_counter, sizeof h.scan_counter);
    field(offsetof(H, time_stamp), &h.time_stamp, sizeof h.time_stamp);
    field(offsetof(H, number_of_samples), &h.number_of_samples, sizeof h.number_of_samples);
    field(offsetof(H, channels), &h.channels, sizeof h.channels);
    field(offsetof(H, sample_time_us), &h.sample_time_us, sizeof h.sample_time_us);
    field(offsetof(H, waveform_id), &h.waveform_id, sizeof h.waveform_id);
    put(buf, sizeof buf);
    put(w.data.data(), n * sizeof(uint32_t));
}

template <typename Put>
void emit_image(Put& put, const Image& im) {
    uint64_t pixels = 0;
    try {
        pixels = image_pixel_bytes(im.head);
    } catch (const ProtocolError& e) {
        throw std::invalid_argument(e.what());
    }
    if (im.pixels.size() != pixels)
        throw std::invalid_argument("IMAGE: header says " + num(pixels) + " pixel bytes (" + describe_matrix(im.head) +
                                    ") but holds " + num(im.pixels.size()));
    // Exact meta length, no NUL, and the header's attribute_string_len agreeing with it (protocol.md).
    size_t meta_len = im.meta.size();
    while (meta_len > 0 && im.meta[meta_len - 1] == '\0') --meta_len;
    if (meta_len > UINT32_MAX)
        throw std::invalid_argument("IMAGE: meta of " + num(meta_len) + " bytes does not fit attribute_string_len");
    ISMRMRD::ISMRMRD_ImageHeader h = im.head;
    h.attribute_string_len = static_cast<uint32_t>(meta_len);
    put(&h, kImageHeaderBytes);
    put_pod(put, static_cast<uint64_t>(meta_len));
    put(im.meta.data(), meta_len);
    put(im.pixels.data(), im.pixels.size());
}

template <typename Put>
void emit_dicom(Put& put, const DicomWithName& d) {
    if (d.dicom.size() > UINT32_MAX)
        throw std::invalid_argument("DICOM_WITHNAME: " + num(d.dicom.size()) + " bytes do not fit the u32 length");
    put_pod(put, static_cast<uint32_t>(d.dicom.size()));
    put(d.dicom.data(), d.dicom.size());
    put_sized<uint64_t>(put, d.filename, "DICOM_WITHNAME file name");
    put_sized<uint64_t>(put, d.meta_xml, "DICOM_WITHNAME meta");
}

// The body of each message; every part is validated before the first byte is put.
template <typename Put>
struct BodyEmitter {
    Put& put;
    void operator()(const ConfigFile& m) const { emit_config_file(put, m); }
    void operator()(const ConfigScript& m) const { put_sized<uint32_t>(put, m.text, "CONFIG_SCRIPT"); }
    void operator()(const ParameterScript& m) const { put_sized<uint32_t>(put, m.xml, "PARAMETER_SCRIPT"); }
    void operator()(const Close&) const {}
    void operator()(const Text& m) const { put_sized<uint32_t>(put, m.text, "TEXT"); }
    void operator()(const Query& m) const {
        put_pod(put, m.reserved);
        put_pod(put, m.correlation_id);
        put_sized<uint64_t>(put, m.key, "QUERY key");
    }
    void operator()(const Response& m) const {
        put_pod(put, m.correlation_id);
        put_sized<uint64_t>(put, m.text, "RESPONSE");
    }
    void operator()(const Acquisition& m) const { emit_acquisition(put, m); }
    void operator()(const Waveform& m) const { emit_waveform(put, m); }
    void operator()(const Image& m) const { emit_image(put, m); }
    void operator()(const DependencyQuery& m) const { put_sized<uint64_t>(put, m.meta_xml, "DEPENDENCY_QUERY"); }
    void operator()(const DicomWithName& m) const { emit_dicom(put, m); }
};

template <typename Put>
void emit(Put& put, const WireMessage& msg) {
    // The id goes out just before the body's first piece, so a message rejected by validation leaves
    // nothing half-written in the sink (the stream stays framed).
    bool id_sent = false;
    const uint16_t id = message_id(msg);
    auto put_after_id = [&](const void* p, size_t n) {
        if (!id_sent) {
            put(&id, sizeof id);
            id_sent = true;
        }
        if (n > 0) put(p, n);
    };
    std::visit(BodyEmitter<decltype(put_after_id)>{put_after_id}, msg);
    if (!id_sent) put(&id, sizeof id);  // CLOSE has no body
}

}  // namespace

namespace {

Received read_with(ByteReader& in, const Limits& limits, PayloadGate* gate) {
    // The id is read a byte at a time so a stream that ends after its first byte counts as truncated,
    // and only an end before any byte is a clean EndOfStream.
    uint8_t id_bytes[2];
    in.read_exact(&id_bytes[0], 1);  // EndOfStream here is the clean end
    try {
        in.read_exact(&id_bytes[1], 1);
    } catch (const EndOfStream& e) {
        throw ProtocolError(std::string("truncated message id: stream ended after 1 of 2 bytes: ") + e.what());
    }
    const uint16_t id = static_cast<uint16_t>(id_bytes[0] | (id_bytes[1] << 8));
    const char* name = bare_name(id);
    if (!name) throw ProtocolError("unknown message id " + num(id));
    MessageReader r(in, id, name, gate);
    Received out{read_body(id, r, limits)};
    out.skipped = r.skipped();
    return out;
}

}  // namespace

Received read_message(ByteReader& in, const Limits& limits, PayloadGate& gate) { return read_with(in, limits, &gate); }

WireMessage read_message(ByteReader& in, const Limits& limits) { return read_with(in, limits, nullptr).message; }

std::string describe(const PayloadInfo& p) {
    if (p.acquisition) return describe_acquisition(*p.acquisition);
    return id_name(p.id) + " of " + num(p.bytes) + " bytes";
}

std::vector<uint8_t> encode(const WireMessage& msg) {
    std::vector<uint8_t> out;
    auto put = [&out](const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + n);
    };
    emit(put, msg);
    return out;
}

void write_message(ByteWriter& out, const WireMessage& msg) {
    auto put = [&out](const void* p, size_t n) { out.write_all(p, n); };
    emit(put, msg);
}

uint16_t message_id(const WireMessage& msg) {
    struct Ids {
        uint16_t operator()(const ConfigFile&) const { return kConfigFile; }
        uint16_t operator()(const ConfigScript&) const { return kConfigScript; }
        uint16_t operator()(const ParameterScript&) const { return kParameterScript; }
        uint16_t operator()(const Close&) const { return kClose; }
        uint16_t operator()(const Text&) const { return kText; }
        uint16_t operator()(const Query&) const { return kQuery; }
        uint16_t operator()(const Response&) const { return kResponse; }
        uint16_t operator()(const Acquisition&) const { return kAcquisition; }
        uint16_t operator()(const Waveform&) const { return kWaveform; }
        uint16_t operator()(const Image&) const { return kImage; }
        uint16_t operator()(const DependencyQuery&) const { return kDependencyQuery; }
        uint16_t operator()(const DicomWithName&) const { return kDicomWithName; }
    };
    return std::visit(Ids{}, msg);
}

std::string id_name(uint16_t id) {
    const char* name = bare_name(id);
    return std::string(name ? name : "unknown") + "(" + num(id) + ")";
}

}  // namespace larmor::wire
