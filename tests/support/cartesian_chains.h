#pragma once
// The Cartesian chains the parallel-imaging tests compare against, built from the real gadgets, and a
// dataset run through a chain with its images and texts collected.
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "gadgets/gadget.h"
#include "tests/support/gadget_harness.h"

namespace larmor::test {

// noise_adjust -> remove_ro_oversampling -> accumulate_trigger, which keeps the ACS lines with keep_acs.
std::vector<std::unique_ptr<Gadget>> cartesian_front(bool keep_acs);

// The front, then FFT, root-sum-of-squares and magnitude: zero-filled RSS of undersampled data. With
// keep_acs, the ACS lines' own (unaliased) image comes first.
std::vector<std::unique_ptr<Gadget>> rss_chain(bool keep_acs = false);

struct ChainOutput {
    std::vector<Image> images;
    std::vector<std::string> texts;
};

// Every acquisition of `ds` through `chain` on `be` in a session named `chain_name`; `peers` are the
// session's backends on further devices (SessionContext::peers), to force a device count.
ChainOutput run_dataset(std::vector<std::unique_ptr<Gadget>> chain, const Dataset& ds, std::shared_ptr<Backend> be,
                        const std::string& chain_name, std::vector<std::shared_ptr<Backend>> peers = {});

}  // namespace larmor::test
