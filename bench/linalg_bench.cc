// Benchmarks of the "linalg" standard operators (scripts/bench.sh).
#include <benchmark/benchmark.h>

#include "backplane/dispatcher/dispatcher.h"
