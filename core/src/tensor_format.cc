// TensorBase::format(): the values of a tensor as text, PyTorch-style.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backplane/core/str_cat.h"
#include "backplane/core/tensor_base.h"

namespace backplane {
namespace {

// The indices format() shows along one dimension of size n: all of them, or
// the first and last `edge` when the tensor is summarised.
std::vector<int64_t> shownIndices(int64_t n, bool summarise, int64_t edge) {
  std::vector<int64_t> out;
  if (summarise && n > 2 * edge) {
    for (int64_t i = 0; i < edge; ++i) out.push_back(i);
    for (int64_t i = n - edge; i < n; ++i) out.push_back(i);
  } else {
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
  }
  return out;
}

// The shown elements in row-major order of the shown indices, as T. A tensor
// that is not summarised is read in one copy; a summarised one element by
// element, so a huge device tensor is never copied whole.
template <typename T>
std::vector<T> shownValues(const TensorBase& t, const std::vector<std::vector<int64_t>>& shown, bool summarise) {
  if (!summarise) return t.toVector<T>();
  std::vector<T> out;
  std::vector<size_t> pos(shown.size(), 0);
  while (true) {
    int64_t offset = t.storage_offset();
    for (size_t d = 0; d < shown.size(); ++d) offset += shown[d][pos[d]] * t.stride(static_cast<int64_t>(d));
    out.push_back(t.as_strided({}, {}, offset).item<T>());
    size_t d = shown.size();
    while (d > 0 && ++pos[d - 1] == shown[d - 1].size()) pos[--d] = 0;
    if (d == 0) return out;
  }
}

std::string printed(const char* fmt, double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, precision, v);
  return buf;
}

// Floating values share one notation: "1." for whole numbers, fixed point,
// or scientific when magnitudes are very large or very small.
std::vector<std::string> floatCells(const std::vector<double>& values, int precision) {
  bool whole = true;
  double max_abs = 0, min_abs = INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    whole = whole && v == std::trunc(v);
    max_abs = std::max(max_abs, std::fabs(v));
    if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
  }
  const bool scientific = max_abs >= 1e8 || (!whole && min_abs < 1e-4) || (whole && max_abs >= 1e16);
  std::vector<std::string> cells;
  cells.reserve(values.size());
  for (double v : values) {
    if (std::isnan(v))
      cells.emplace_back("nan");
    else if (std::isinf(v))
      cells.emplace_back(v > 0 ? "inf" : "-inf");
    else if (scientific)
      cells.push_back(printed("%.*e", v, precision));
    else if (whole)
      cells.push_back(printed("%.*f", v, 0) + ".");
    else
      cells.push_back(printed("%.*f", v, precision));
  }
  return cells;
}

std::vector<std::string> cellsOf(const TensorBase& t, const std::vector<std::vector<int64_t>>& shown, bool summarise,
                                 int precision) {
  std::vector<std::string> cells;
  if (isFloatingType(t.dtype())) return floatCells(shownValues<double>(t, shown, summarise), precision);
  if (t.dtype() == ScalarType::UInt64) {  // its upper half does not fit int64
    for (uint64_t v : shownValues<uint64_t>(t, shown, summarise)) cells.push_back(std::to_string(v));
    return cells;
  }
  for (int64_t v : shownValues<int64_t>(t, shown, summarise)) {
    cells.push_back(t.dtype() == ScalarType::Bool ? (v ? "True" : "False") : std::to_string(v));
  }
  return cells;
}

struct Printer {
  const std::vector<std::vector<int64_t>>& shown;
  const std::vector<std::string>& cells;
  size_t width;   // of every cell, right-aligned
  size_t indent;  // columns before the outermost '['
  size_t next = 0;
  std::string out;

  // Appends dimension d of the shown elements, with "..." where indices skip.
  // Recursion one level per dim: at most kMaxTensorDims deep (Note [Rank limit]).
  void print(size_t d) {
    out += '[';
    const std::vector<int64_t>& idx = shown[d];
    const bool last_dim = d + 1 == shown.size();
    for (size_t i = 0; i < idx.size(); ++i) {
      if (last_dim) {
        out.append(width - cells[next].size(), ' ');
        out += cells[next++];
      } else {
        print(d + 1);
      }
      if (i + 1 == idx.size()) break;
      out += ',';
      const bool gap = idx[i + 1] != idx[i] + 1;
      if (last_dim) {
        out += gap ? " ..., " : " ";
        continue;
      }
      // Rows break lines; blocks of higher dimensions leave blank lines between.
      // (Appended piece by piece: GCC 12 at -O3 mistakes `"\n" + std::string(...)`
      // for an overlapping copy, -Wrestrict.)
      std::string separator(1, '\n');
      separator.append(shown.size() - d - 2, '\n');
      separator.append(indent + d + 1, ' ');
      out += separator;
      if (gap) {
        out += "...,";
        out += separator;
      }
    }
    out += ']';
  }
};

}  // namespace

std::string TensorBase::format(const FormatOptions& options) const {
  if (!defined()) return "tensor(undefined)";
  BP_CHECK(options.threshold >= 0 && options.edge_items >= 1 && options.precision >= 0 && options.precision <= 17,
           "TensorBase::format: options need threshold >= 0, edge_items >= 1 and precision in [0, 17], got ",
           options.threshold, ", ", options.edge_items, ", ", options.precision);
  std::string suffix = std::string(scalarTypeName(dtype())) + ", " + device().str() + ")";
  if (numel() == 0) return "tensor([], size=" + strCat(sizes()) + ", " + suffix;
  const bool summarise = numel() > options.threshold;
  std::vector<std::vector<int64_t>> shown;
  for (int64_t d = 0; d < dim(); ++d) shown.push_back(shownIndices(size(d), summarise, options.edge_items));
  std::vector<std::string> cells = cellsOf(*this, shown, summarise, options.precision);
  if (dim() == 0) return "tensor(" + cells[0] + ", " + suffix;
  size_t width = 0;
  for (const std::string& c : cells) width = std::max(width, c.size());
  Printer p{shown, cells, width, /*indent=*/7, /*next=*/0, /*out=*/{}};
  p.print(0);
  return "tensor(" + p.out + ", " + suffix;
}

}  // namespace backplane
