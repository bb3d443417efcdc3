// Benchmarks of the "elementwise" standard operators (scripts/bench.sh).
#include <benchmark/benchmark.h>

#include "backplane/dispatcher/dispatcher.h"
