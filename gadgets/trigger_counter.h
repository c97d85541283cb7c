#pragma once
// The loop counter a TriggerDimension watches (proto/chain.proto): the accumulators (Cartesian and
// non-Cartesian) emit their buffers when it changes; none for TRIGGER_AUTO / TRIGGER_NONE.
#include <cstdint>
#include <optional>

#include <ismrmrd/ismrmrd.h>

#include "chain.pb.h"

namespace larmor {

inline std::optional<uint16_t> trigger_counter(const ISMRMRD::ISMRMRD_EncodingCounters& idx,
                                               config::TriggerDimension d) {
    switch (d) {
        case config::TRIGGER_SLICE: return idx.slice;
        case config::TRIGGER_CONTRAST: return idx.contrast;
        case config::TRIGGER_PHASE: return idx.phase;
        case config::TRIGGER_REPETITION: return idx.repetition;
        case config::TRIGGER_SET: return idx.set;
        case config::TRIGGER_AVERAGE: return idx.average;
        default: return std::nullopt;
    }
}

}  // namespace larmor
