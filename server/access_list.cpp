#include "server/access_list.h"

#include <algorithm>
#include <stdexcept>

namespace larmor::server {
namespace {

namespace ip = boost::asio::ip;

// An IPv4-mapped IPv6 address is an IPv4 client seen through a dual-stack socket: judge it as IPv4.
ip::address unmapped(const ip::address& a) {
    if (a.is_v6() && a.to_v6().is_v4_mapped()) return ip::make_address_v4(ip::v4_mapped, a.to_v6());
    return a;
}

// True when the first `prefix` bits of a and b agree.
bool same_prefix(const uint8_t* a, const uint8_t* b, unsigned prefix) {
    const unsigned whole = prefix / 8, rest = prefix % 8;
    for (unsigned i = 0; i < whole; ++i)
        if (a[i] != b[i]) return false;
    if (rest == 0) return true;
    const uint8_t mask = static_cast<uint8_t>(0xff00u >> rest);
    return (a[whole] & mask) == (b[whole] & mask);
}

[[noreturn]] void bad(const std::string& text, const std::string& why) {
    throw std::invalid_argument("'" + text + "': " + why);
}

}  // namespace

bool Network::contains(const ip::address& address) const {
    const ip::address a = unmapped(address);
    if (a.is_v4() != v4) return false;
    if (v4) return same_prefix(a.to_v4().to_bytes().data(), bytes.data(), prefix);
    return same_prefix(a.to_v6().to_bytes().data(), bytes.data(), prefix);
}

std::string Network::to_string() const {
    std::string addr;
    if (v4) {
        ip::address_v4::bytes_type b{};
        std::copy(bytes.begin(), bytes.begin() + 4, b.begin());
        addr = ip::address_v4(b).to_string();
    } else {
        addr = ip::address_v6(bytes).to_string();
    }
    return addr + "/" + std::to_string(prefix);
}

Network parse_network(const std::string& text) {
    if (text.empty()) bad(text, "empty; expected a network such as 10.0.0.0/8 or fd00::/8");
    if (text.find_first_of(" \t\r\n") != std::string::npos) bad(text, "contains blanks");
    const size_t slash = text.find('/');
    const std::string addr_text = text.substr(0, slash);
    // A zone index names an interface of this machine, not a network of clients (RFC 4007 section 11).
    if (addr_text.find('%') != std::string::npos) bad(text, "a zone index (%...) has no place in a network");
    boost::system::error_code ec;
    const ip::address parsed = ip::make_address(addr_text, ec);
    if (ec) bad(text, "'" + addr_text + "' is not an IPv4 or IPv6 address");

    Network n;
    const ip::address a = unmapped(parsed);
    const bool mapped = parsed.is_v6() && a.is_v4();
    n.v4 = a.is_v4();
    const unsigned written_max = parsed.is_v4() ? 32 : 128;
    unsigned prefix = written_max;
    if (slash != std::string::npos) {
        const std::string p = text.substr(slash + 1);
        if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos)
            bad(text, "the prefix length '" + p + "' is not a number of bits (0.." + std::to_string(written_max) + ")");
        prefix = static_cast<unsigned>(std::stoul(p));
        if (prefix > written_max)
            bad(text, "the prefix length " + p + " is longer than the " + std::to_string(written_max) +
                          " bits of an " + (parsed.is_v4() ? "IPv4" : "IPv6") + " address");
    }
    if (mapped) {
        // ::ffff:10.0.0.0/104 is 10.0.0.0/8; a shorter prefix reaches past the mapped range into
        // plain IPv6 space, which is not what anyone writing this form means.
        if (prefix < 96) bad(text, "an IPv4-mapped network needs a prefix of at least 96 bits");
        prefix -= 96;
    }
    n.prefix = prefix;
    if (n.v4) {
        const auto b = a.to_v4().to_bytes();
        std::copy(b.begin(), b.end(), n.bytes.begin());
    } else {
        n.bytes = a.to_v6().to_bytes();
    }
    // Host bits set: "10.0.0.1/8" admits all of 10/8, which a reader of the command line would not
    // expect; name both readings instead of guessing.
    Network canonical = n;
    const unsigned width = n.v4 ? 32 : 128;
    for (unsigned bit = prefix; bit < width; ++bit)
        canonical.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
    if (canonical.bytes != n.bytes) {
        Network host = n;
        host.prefix = width;
        bad(text, "host bits are set after the /" + std::to_string(prefix) + " prefix; write " + canonical.to_string() +
                      " for the network or " + host.to_string() + " for the one host");
    }
    return n;
}

AccessList::AccessList(const std::vector<std::string>& networks) {
    for (const auto& text : networks) {
        try {
            networks_.push_back(parse_network(text));
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(std::string("--allow ") + e.what());
        }
    }
}

bool AccessList::allows(const ip::address& address) const {
    if (networks_.empty()) return true;
    for (const auto& n : networks_)
        if (n.contains(address)) return true;
    return false;
}

std::string AccessList::to_string() const {
    if (networks_.empty()) return "everyone";
    std::string out;
    for (const auto& n : networks_) out += (out.empty() ? "" : ", ") + n.to_string();
    return out;
}

}  // namespace larmor::server
