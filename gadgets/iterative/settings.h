#pragma once
// The settings messages every iterative gadget shares (proto/chain.proto: SolverSettings, NufftSettings),
// read here and only here: the defaults, the ranges and the words of a refusal live in one place, so
// a knob means the same in every gadget that has it.
#include <string>

#include "chain.pb.h"
#include "core/iter/cg.h"
#include "core/linops/nufft.h"

namespace larmor {

// The solver's knobs with the proto's defaults filled in. Default-constructed = an empty
// SolverSettings, so a gadget that builds one in code gets what a chain that says nothing gets.
struct SolverKnobs {
    int iterations = 30;
    float tolerance = 1e-6f;     // on ||r|| / ||b||; 0 = run all iterations
    float lambda = 0.01f;        // Tikhonov weight, relative to the data term
    int progress_interval = 10;  // -1 = no progress lines
    float deadline_ms = 0.f;     // 0 = none

    CGOptions cg() const { return {iterations, static_cast<double>(tolerance)}; }
};

// Defaults filled in and every value checked; throws ConfigError
// "<gadget>: <field>.<knob> <value> <what is wrong>" (e.g. "CgSense: solver.iterations -3 is outside
// 1..10000"). `field` is the settings message's name in the gadget's proto.
SolverKnobs solver_knobs(const config::SolverSettings& s, const std::string& gadget,
                         const std::string& field = "solver");

// The same for the NUFFT: tolerance 0 = 1e-3 (1e-6 .. 0.1), upsampling 0 = 2 (1.25 .. 2).
NufftOptions nufft_options(const config::NufftSettings& s, const std::string& gadget,
                           const std::string& field = "nufft");

}  // namespace larmor
