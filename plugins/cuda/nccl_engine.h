#pragma once
// NCCL as the CUDA plugin's collective engine (Note [NCCL engine] in
// nccl_engine.cu).
#include <cstdint>

#include "backplane/plugin.hpp"

namespace bp_cuda {

// Registers the comm:: kernels on the cuda device type `type`.
void registerNcclCollectives(bp::Library& m, int32_t type);

}  // namespace bp_cuda
