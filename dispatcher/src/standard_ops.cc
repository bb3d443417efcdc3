#include "backplane/dispatcher/standard_ops.h"

namespace backplane {

namespace {
// Note [The standard operator table]
// The one place the standard operators are declared. Names, arguments and
// defaults follow PyTorch's native_functions.yaml so that code and kernels
// port over. The set grows with the CPU plugin's coverage.
constexpr StandardOp kStandardOps[] = {
    {"add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"},
    {"sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"},
    {"mul.Tensor(Tensor self, Tensor other) -> Tensor"},
    {"div.Tensor(Tensor self, Tensor other) -> Tensor"},
    {"neg(Tensor self) -> Tensor"},
    {"relu(Tensor self) -> Tensor"},
    {"sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"},
};
}  // namespace

std::span<const StandardOp> standardOperators() { return kStandardOps; }

}  // namespace backplane
