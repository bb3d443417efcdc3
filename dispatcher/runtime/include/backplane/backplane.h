#pragma once
// Everything an application uses, in one include: the Runtime (plugins,
// devices, device strings), the operators as functions and tensor methods,
// streams and events, the per-op report, DLPack, and the random seed.

#include "backplane/dispatcher/random.h"  // IWYU pragma: export
#include "backplane/dlpack.h"             // IWYU pragma: export
#include "backplane/ops.h"                // IWYU pragma: export
#include "backplane/profiler.h"           // IWYU pragma: export
#include "backplane/runtime.h"            // IWYU pragma: export
#include "backplane/stream.h"             // IWYU pragma: export
