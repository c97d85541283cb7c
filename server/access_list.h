#pragma once
// --allow: the client networks larmor-server accepts connections from, in CIDR notation (RFC 4632
// for IPv4, RFC 4291 section 2.3 for IPv6). Checked at accept, before a session exists: a refused
// connection costs the server no thread and no session memory.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/asio/ip/address.hpp>

namespace larmor::server {

// One allowed network. IPv4 networks and IPv4-mapped IPv6 ones (::ffff:a.b.c.d/96+n, RFC 4291
// section 2.5.5.2) are kept as IPv4, so "10.0.0.0/8" also admits a client that a dual-stack socket
// reports as ::ffff:10.1.2.3.
struct Network {
    bool v4 = true;
    std::array<uint8_t, 16> bytes{};  // the network address (4 bytes used for IPv4)
    unsigned prefix = 0;              // 0..32 (IPv4) or 0..128 (IPv6)

    bool contains(const boost::asio::ip::address& address) const;
    std::string to_string() const;  // canonical CIDR: "10.0.0.0/8", "fd00::/8"
};

// Parses "ADDRESS/PREFIX" or a bare ADDRESS (one host: /32 or /128). Throws std::invalid_argument
// naming `text` (quoted, first) and what is wrong with it: not an address, a prefix out of range, host bits set
// ("10.0.0.1/8": probably a typo for 10.0.0.0/8 or 10.0.0.1/32), a zone index ("fe80::1%eth0"),
// surrounding blanks.
Network parse_network(const std::string& text);

class AccessList {
public:
    AccessList() = default;
    // Throws std::invalid_argument ("--allow '<text>': <why>") on the first malformed entry.
    explicit AccessList(const std::vector<std::string>& networks);

    // True when the list is empty (everyone) or some network contains `address`.
    bool allows(const boost::asio::ip::address& address) const;
    bool empty() const { return networks_.empty(); }
    // "10.0.0.0/8, 127.0.0.1/32", or "everyone" for an empty list.
    std::string to_string() const;

private:
    std::vector<Network> networks_;
};

}  // namespace larmor::server
