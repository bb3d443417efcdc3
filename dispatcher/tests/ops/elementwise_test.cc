// Standard operators, family "elementwise": each op against a double-precision
// reference through the CPU plugin.
#include "ops_test_util.h"

namespace backplane::ops_test {
namespace {

}  // namespace
}  // namespace backplane::ops_test
