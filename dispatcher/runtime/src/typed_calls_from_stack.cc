// callAsTyped(): an op called from a Stack the way an application's typed
// call reaches it, for each signature typed_calls.h lists (the ones whose
// plugin kernels the host calls typed). Apart from plugin_host.cc, which
// instantiates the plugin side of the same signatures, so that the two
// compile in parallel.
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "backplane/dispatch/boxed_arguments.h"
#include "backplane/dispatch/schema_signature.h"
#include "backplane/runtime/plugin_registry.h"
#include "typed_calls.h"

namespace backplane::plugin_detail {
namespace {

// A typed call of `op` (op.typed<Ret(Args...)>().call) with the arguments
// on `stack`, which it replaces with the returns: what an application's
// call runs, for callers that hold a Stack (callAsTyped()).
template <typename Ret, typename... Args>
void callTypedFromStack(const OperatorHandle& op, Stack& stack) {
  using backplane::detail::arg_key_t;
  using backplane::detail::ArgTraits;
  const auto typed = op.typed<Ret(Args...)>();
  [&]<size_t... I>(std::index_sequence<I...>) {
    // The unboxed values, held for the call (a list's ArrayRef views its
    // vector here, an IntArrayRef the stack's list).
    std::tuple<decltype(ArgTraits<arg_key_t<Args>>::fromIValue(stack[I]))...> held{
        ArgTraits<arg_key_t<Args>>::fromIValue(stack[I])...};
    if constexpr (std::is_void_v<Ret>) {
      typed.call(std::get<I>(held)...);
      stack.clear();
    } else {
      Ret ret = typed.call(std::get<I>(held)...);
      stack.clear();
      backplane::detail::ReturnTraits<Ret>::push(stack, std::move(ret));
    }
  }
  (std::index_sequence_for<Args...>{});
}

using FromStack = void (*)(const OperatorHandle&, Stack&);

template <typename Sig>
struct FromStackEntry;
template <typename Ret, typename... Args>
struct FromStackEntry<Ret(Args...)> {
  static FromStack value() { return &callTypedFromStack<Ret, Args...>; }
};

const absl::flat_hash_map<std::string, FromStack>& fromStackTable() {
  static const auto* table =
      new absl::flat_hash_map<std::string, FromStack>(makeSignatureTable<FromStack, FromStackEntry>(FastSignatures{}));
  return *table;
}

}  // namespace
}  // namespace backplane::plugin_detail

namespace backplane {

bool callAsTyped(const OperatorHandle& op, Stack& stack) {
  const auto& table = plugin_detail::fromStackTable();
  const auto it = table.find(cppSignatureForSchema(op.schema()));
  if (it == table.end()) return false;
  completeBoxedArguments(op.schema(), stack);  // defaults, types and conversions as callBoxed
  it->second(op, stack);
  return true;
}

}  // namespace backplane
