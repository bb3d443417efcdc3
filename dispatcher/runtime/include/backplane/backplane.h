#pragma once
// Everything an application uses, in one include: the Runtime (plugins,
// devices, device strings), the operators as functions and tensor methods,
// streams and events, the per-op report, DLPack, the random seed, and this
// thread's host<->device transfer count (hostDeviceTransfers()), autograd and
// the optimizers.

#include "backplane/autograd/autograd.h"  // IWYU pragma: export
#include "backplane/autograd/optim.h"     // IWYU pragma: export
#include "backplane/core/transfers.h"     // IWYU pragma: export
#include "backplane/ops/ops.h"            // IWYU pragma: export
#include "backplane/ops/random.h"         // IWYU pragma: export
#include "backplane/runtime/dlpack.h"     // IWYU pragma: export
#include "backplane/runtime/profiler.h"   // IWYU pragma: export
#include "backplane/runtime/runtime.h"    // IWYU pragma: export
#include "backplane/runtime/stream.h"     // IWYU pragma: export
