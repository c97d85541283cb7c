// --allow networks (server/access_list.h): CIDR parsing of IPv4 and IPv6 (RFC 4632, RFC 4291), the
// edge prefixes, IPv4-mapped IPv6 on either side, and malformed values named in the error.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "server/access_list.h"

namespace larmor::server {
namespace {

boost::asio::ip::address ip(const std::string& text) { return boost::asio::ip::make_address(text); }

bool in(const std::string& network, const std::string& address) { return parse_network(network).contains(ip(address)); }

// The message of the std::invalid_argument that parse_network throws, or "" when it accepts `text`.
std::string parse_error(const std::string& text) {
    try {
        parse_network(text);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

TEST(AccessList, Ipv4PrefixesIncludingTheEdges) {
    EXPECT_TRUE(in("10.0.0.0/8", "10.255.1.2"));
    EXPECT_FALSE(in("10.0.0.0/8", "11.0.0.0"));
    EXPECT_FALSE(in("10.0.0.0/8", "9.255.255.255"));
    EXPECT_TRUE(in("192.168.4.0/22", "192.168.7.255"));  // a prefix that ends inside a byte
    EXPECT_FALSE(in("192.168.4.0/22", "192.168.8.0"));
    EXPECT_FALSE(in("192.168.4.0/22", "192.168.3.255"));
    EXPECT_TRUE(in("0.0.0.0/0", "1.2.3.4"));  // /0: every IPv4 address ...
    EXPECT_TRUE(in("0.0.0.0/0", "255.255.255.255"));
    EXPECT_FALSE(in("0.0.0.0/0", "::1"));  // ... and no IPv6 one
    EXPECT_TRUE(in("127.0.0.1/32", "127.0.0.1"));
    EXPECT_FALSE(in("127.0.0.1/32", "127.0.0.2"));
    EXPECT_TRUE(in("127.0.0.1", "127.0.0.1"));  // a bare address is one host
    EXPECT_FALSE(in("127.0.0.1", "127.0.0.0"));
}

TEST(AccessList, Ipv6PrefixesIncludingTheEdges) {
    EXPECT_TRUE(in("fd00::/8", "fd12:3456::1"));
    EXPECT_FALSE(in("fd00::/8", "fe80::1"));
    EXPECT_TRUE(in("2001:db8::/32", "2001:db8:ffff::1"));
    EXPECT_FALSE(in("2001:db8::/32", "2001:db9::1"));
    EXPECT_TRUE(in("2001:db8:0:8000::/49", "2001:db8:0:ffff::"));  // inside a byte
    EXPECT_FALSE(in("2001:db8:0:8000::/49", "2001:db8:0:7fff::"));
    EXPECT_TRUE(in("::/0", "::1"));
    EXPECT_TRUE(in("::/0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
    EXPECT_FALSE(in("::/0", "10.0.0.1"));  // IPv4 clients need an IPv4 network
    EXPECT_TRUE(in("::1/128", "::1"));
    EXPECT_FALSE(in("::1/128", "::2"));
    EXPECT_TRUE(in("::1", "::1"));
}

// A dual-stack socket (bound to ::) reports IPv4 clients as ::ffff:a.b.c.d; they are IPv4 clients.
TEST(AccessList, Ipv4MappedIpv6IsIpv4) {
    EXPECT_TRUE(in("10.0.0.0/8", "::ffff:10.1.2.3"));
    EXPECT_FALSE(in("10.0.0.0/8", "::ffff:11.1.2.3"));
    EXPECT_TRUE(in("127.0.0.1/32", "::ffff:127.0.0.1"));
    // Written as mapped IPv6, a network is the IPv4 network it maps.
    EXPECT_TRUE(in("::ffff:10.0.0.0/104", "10.9.8.7"));
    EXPECT_TRUE(in("::ffff:10.0.0.0/104", "::ffff:10.9.8.7"));
    EXPECT_FALSE(in("::ffff:10.0.0.0/104", "11.0.0.0"));
    EXPECT_EQ(parse_network("::ffff:10.0.0.0/104").to_string(), "10.0.0.0/8");
    EXPECT_EQ(parse_network("::ffff:0.0.0.0/96").to_string(), "0.0.0.0/0");
    EXPECT_EQ(parse_network("::ffff:192.168.1.1").to_string(), "192.168.1.1/32");
    // Not every IPv6 address that ends in an IPv4 one is mapped (::10.0.0.1 is IPv4-compatible, RFC
    // 4291 section 2.5.5.1, deprecated): it stays IPv6.
    EXPECT_FALSE(in("10.0.0.0/8", "::10.0.0.1"));
}

TEST(AccessList, CanonicalText) {
    EXPECT_EQ(parse_network("10.0.0.0/8").to_string(), "10.0.0.0/8");
    EXPECT_EQ(parse_network("127.0.0.1").to_string(), "127.0.0.1/32");
    EXPECT_EQ(parse_network("FD00:0:0::/8").to_string(), "fd00::/8");
    EXPECT_EQ(parse_network("::1").to_string(), "::1/128");
}

TEST(AccessList, MalformedValuesAreNamedWithTheReason) {
    struct Case {
        const char* text;
        const char* reason;
    };
    for (const Case& c : {Case{"", "empty"}, Case{"10.0.0.0/", "not a number"}, Case{"10.0.0.0/x", "not a number"},
                          Case{"10.0.0.0/-1", "not a number"}, Case{"10.0.0.0/+8", "not a number"},
                          Case{"10.0.0.0/33", "longer than the 32 bits"}, Case{"::/129", "longer than the 128 bits"},
                          Case{"10.0.0.0/0008", "not a number"}, Case{"300.0.0.0/8", "not an IPv4 or IPv6 address"},
                          Case{"10.0.0/8", "not an IPv4 or IPv6 address"}, Case{"10.0.0.0/8/8", "not a number"},
                          Case{"localhost", "not an IPv4 or IPv6 address"}, Case{"1::2::3", "not an IPv4 or IPv6"},
                          Case{" 10.0.0.0/8", "blanks"}, Case{"10.0.0.0/8 ", "blanks"},
                          Case{"fe80::1%eth0", "zone index"}, Case{"::ffff:10.0.0.0/95", "at least 96 bits"},
                          Case{"10.0.0.1/8", "write 10.0.0.0/8 for the network or 10.0.0.1/32 for the one host"},
                          Case{"fd00::1/8", "write fd00::/8 for the network or fd00::1/128"},
                          Case{"0.0.0.1/0", "write 0.0.0.0/0"}}) {
        const std::string error = parse_error(c.text);
        EXPECT_NE(error.find(std::string("'") + c.text + "'"), std::string::npos) << c.text << ": " << error;
        EXPECT_NE(error.find(c.reason), std::string::npos) << c.text << ": " << error;
    }
}

TEST(AccessList, EmptyListAllowsEveryoneAndAListOnlyItsNetworks) {
    const AccessList everyone;
    EXPECT_TRUE(everyone.allows(ip("203.0.113.9")));
    EXPECT_TRUE(everyone.allows(ip("2001:db8::9")));
    EXPECT_EQ(everyone.to_string(), "everyone");

    const AccessList list({"10.0.0.0/8", "127.0.0.1/32", "2001:db8::/32"});
    EXPECT_TRUE(list.allows(ip("10.1.1.1")));
    EXPECT_TRUE(list.allows(ip("127.0.0.1")));
    EXPECT_TRUE(list.allows(ip("::ffff:127.0.0.1")));
    EXPECT_TRUE(list.allows(ip("2001:db8::5")));
    EXPECT_FALSE(list.allows(ip("127.0.0.2")));
    EXPECT_FALSE(list.allows(ip("::1")));
    EXPECT_FALSE(list.allows(ip("192.168.0.1")));
    EXPECT_EQ(list.to_string(), "10.0.0.0/8, 127.0.0.1/32, 2001:db8::/32");
}

TEST(AccessList, ListConstructorNamesTheFlagAndTheBadEntry) {
    try {
        AccessList({"10.0.0.0/8", "10.0.0.0/40"});
        FAIL() << "accepted a /40 IPv4 network";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("--allow '10.0.0.0/40'"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace larmor::server
