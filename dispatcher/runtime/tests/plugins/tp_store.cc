// tp_store: a C++ SDK plugin that uses the world's key-value store through
// the plugin ABI (BP_HostApi.store_set / store_get, ABI 1.11; Note [The
// world's store]), for store_test.cc. Operator:
//   tpstore::exchange(Tensor mine, int group) -> Tensor
//       sets key "tpstore/<rank>" of `group` to the bytes of `mine` (a
//       contiguous uint8 CPU tensor), then gets every rank's and returns
//       them concatenated in group-rank order: what a collective library
//       does with its ids before its first call.
#include <cstring>
#include <string>

#include <backplane/plugin.hpp>

namespace {

bp::Tensor exchange(const bp::Tensor& mine, int64_t group) {
  BP_PLUGIN_CHECK(mine.dtype() == bp::ScalarType::UInt8 && mine.is_contiguous(),
                  "tpstore::exchange takes a contiguous uint8 tensor");
  const BP_GroupInfo g = bp::groupInfo(group);
  bp::storeSet(group, "tpstore/" + std::to_string(g.rank), mine.data_ptr(), static_cast<size_t>(mine.numel()));
  std::string all;
  for (int r = 0; r < g.size; ++r) all += bp::storeGet(group, "tpstore/" + std::to_string(r));
  bp::Tensor out = bp::Tensor::empty({static_cast<int64_t>(all.size())}, bp::ScalarType::UInt8, bp::Device::cpu());
  if (!all.empty()) std::memcpy(out.data_ptr(), all.data(), all.size());
  return out;
}

void init(bp::Library& m) {
  m.def("tpstore::exchange(Tensor mine, int group) -> Tensor");
  m.impl("tpstore::exchange", 0, &exchange);
}

}  // namespace

BACKPLANE_PLUGIN("tp_store", "0.0.1", init)
