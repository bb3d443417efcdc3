// Benchmarks of the "nn" standard operators (scripts/bench.sh).
#include <benchmark/benchmark.h>

#include "backplane/dispatcher/dispatcher.h"
