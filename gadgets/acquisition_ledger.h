#pragma once
// What became of every acquisition a session received, so that none is lost without a word: the
// gadget that consumes an acquisition records it as used (and how) or as discarded (and why), the
// session records what it drops at the door or after an error, and at the end the session sends
// the summary to the client and its log (server/session.cpp). Received = used + discarded, or the
// summary says how many were still in flight when the session ended.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "wire/messages.h"

namespace larmor {

class AcquisitionLedger {
public:
    // `how`: "imaging", "noise (prewhitening)", ... One per acquisition, by the gadget that consumed it.
    void used(const std::string& how);
    // `why`: a reason a user can act on ("navigator data: not reconstructed by this chain"). The
    // first acquisition of each reason is named in the summary by its scan_counter.
    void discarded(const std::string& why, const wire::Acquisition& a);
    static constexpr uint32_t kUnknownScan = 0xffffffffu;  // e.g. refused while decoding
    void discarded(const std::string& why, uint32_t scan_counter, uint64_t count = 1);

    // n used acquisitions reached an image that left the chain (ImageFinish counts them, from the
    // image's ImageArray::acquisitions), or were in a reconstruction that failed (the chain counts
    // them when a gadget throws on their buffer). The summary says how many of the used ones became
    // images: "used" alone does not mean the client got anything from them.
    void imaged(uint64_t n);
    void failed(uint64_t n);
    uint64_t imaged_count() const;
    uint64_t failed_count() const;

    uint64_t used_count() const;
    uint64_t discarded_count() const;
    uint64_t used_count(const std::string& how) const;
    uint64_t discarded_count(const std::string& why) const;

    // "69 acquisitions received: 68 used (67 imaging, 1 noise (prewhitening)); 67 reached an image; 1
    // discarded: 1 navigator data (first scan_counter 12)". `received` comes from the session, which counts every one read.
    std::string summary(uint64_t received) const;

private:
    struct Reason {
        uint64_t count = 0;
        uint32_t first_scan = kUnknownScan;
    };
    mutable std::mutex m_;
    std::map<std::string, uint64_t> used_;
    std::map<std::string, Reason> discarded_;
    uint64_t imaged_ = 0, failed_ = 0;
};

}  // namespace larmor
