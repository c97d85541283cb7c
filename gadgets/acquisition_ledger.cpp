#include "gadgets/acquisition_ledger.h"

namespace larmor {

void AcquisitionLedger::used(const std::string& how) {
    std::lock_guard<std::mutex> lock(m_);
    ++used_[how];
}

void AcquisitionLedger::discarded(const std::string& why, const wire::Acquisition& a) {
    discarded(why, a.head.scan_counter);
}

void AcquisitionLedger::discarded(const std::string& why, uint32_t scan_counter, uint64_t count) {
    if (count == 0) return;
    std::lock_guard<std::mutex> lock(m_);
    Reason& r = discarded_[why];
    if (r.first_scan == kUnknownScan) r.first_scan = scan_counter;
    r.count += count;
}

void AcquisitionLedger::imaged(uint64_t n) {
    std::lock_guard<std::mutex> lock(m_);
    imaged_ += n;
}

void AcquisitionLedger::failed(uint64_t n) {
    std::lock_guard<std::mutex> lock(m_);
    failed_ += n;
}

uint64_t AcquisitionLedger::imaged_count() const {
    std::lock_guard<std::mutex> lock(m_);
    return imaged_;
}

uint64_t AcquisitionLedger::failed_count() const {
    std::lock_guard<std::mutex> lock(m_);
    return failed_;
}

uint64_t AcquisitionLedger::used_count() const {
    std::lock_guard<std::mutex> lock(m_);
    uint64_t n = 0;
    for (const auto& [how, count] : used_) n += count;
    return n;
}

uint64_t AcquisitionLedger::discarded_count() const {
    std::lock_guard<std::mutex> lock(m_);
    uint64_t n = 0;
    for (const auto& [why, r] : discarded_) n += r.count;
    return n;
}

uint64_t AcquisitionLedger::used_count(const std::string& how) const {
    std::lock_guard<std::mutex> lock(m_);
    const auto it = used_.find(how);
    return it == used_.end() ? 0 : it->second;
}

uint64_t AcquisitionLedger::discarded_count(const std::string& why) const {
    std::lock_guard<std::mutex> lock(m_);
    const auto it = discarded_.find(why);
    return it == discarded_.end() ? 0 : it->second.count;
}

std::string AcquisitionLedger::summary(uint64_t received) const {
    const uint64_t used_n = used_count(), discarded_n = discarded_count();
    std::lock_guard<std::mutex> lock(m_);
    std::string s = std::to_string(received) + (received == 1 ? " acquisition" : " acquisitions") + " received: " + std::to_string(used_n) + " used";
    if (!used_.empty()) {
        s += " (";
        const char* sep = "";
        for (const auto& [how, count] : used_) {
            s += sep + std::to_string(count) + " " + how;
            sep = ", ";
        }
        s += ")";
    }
    if (used_n > 0) {
        s += "; " + std::to_string(imaged_) + " reached an image";
        if (failed_ > 0) s += " (" + std::to_string(failed_) + " were in a reconstruction that failed: see the error)";
    }
    s += "; " + std::to_string(discarded_n) + " discarded";
    if (!discarded_.empty()) {
        s += ": ";
        const char* sep = "";
        for (const auto& [why, r] : discarded_) {
            s += sep + std::to_string(r.count) + " " + why;
            if (r.first_scan != kUnknownScan) s += " (first scan_counter " + std::to_string(r.first_scan) + ")";
            sep = "; ";
        }
    }
    const uint64_t accounted = used_n + discarded_n;
    if (accounted < received)
        s += "; " + std::to_string(received - accounted) + " unaccounted (still in the chain when the session ended)";
    else if (accounted > received)  // a bug in a gadget's bookkeeping; say so rather than hide it
        s += "; " + std::to_string(accounted - received) + " more accounted for than received";
    return s;
}

}  // namespace larmor
