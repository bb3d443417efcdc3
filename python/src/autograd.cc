// Autograd from Python (docs/python.md#autograd): grad mode, backward and
// grad, and the C++ half of backplane.autograd.Function.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <vector>

#include "backplane/autograd/autograd.h"
#include "bindings.h"

namespace backplane::python {

namespace {

// Tensors from a list whose entries are backplane.Tensor or None (undefined).
std::vector<Tensor> tensorsFrom(const nb::handle list, const char* what) {
  std::vector<Tensor> out;
  if (list.is_none()) return out;
  for (nb::handle item : list) {
    if (item.is_none()) {
      out.emplace_back();
      continue;
    }
    const Tensor* t = tensorOrNull(item.ptr());
    if (t == nullptr)
      throw nb::type_error((std::string(what) + " must hold backplane.Tensor objects (or None), not " +
                            nb::cast<std::string>(nb::str(item.type())))
                               .c_str());
    out.push_back(*t);
  }
  return out;
}

nb::list toList(const std::vector<Tensor>& ts) {
  nb::list l;
  for (const Tensor& t : ts) l.append(t.defined() ? wrap(t) : nb::none());
  return l;
}

}  // namespace

void bindAutograd(nb::module_& m) {
  m.def("is_grad_enabled", &autograd::isGradEnabled, "Whether ops on this thread record gradients.");
  m.def("_set_grad_enabled", &autograd::setGradEnabled, nb::arg("enabled"));
  m.def(
      "_backward",
      [](nb::handle outputs, nb::handle grad_outputs, std::optional<bool> retain_graph, bool create_graph) {
        std::vector<Tensor> outs = tensorsFrom(outputs, "tensors"), grads = tensorsFrom(grad_outputs, "grad_tensors");
        nb::gil_scoped_release release;
        autograd::backward(outs, grads, retain_graph, create_graph);
      },
      nb::arg("outputs"), nb::arg("grad_outputs").none(), nb::arg("retain_graph").none(), nb::arg("create_graph"));
  m.def(
      "_grad",
      [](nb::handle outputs, nb::handle inputs, nb::handle grad_outputs, std::optional<bool> retain_graph,
         bool create_graph, bool allow_unused) {
        std::vector<Tensor> outs = tensorsFrom(outputs, "outputs"), ins = tensorsFrom(inputs, "inputs"),
                            grads = tensorsFrom(grad_outputs, "grad_outputs");
        std::vector<Tensor> result;
        {
          nb::gil_scoped_release release;
          result = autograd::grad(outs, ins, grads, retain_graph, create_graph, allow_unused);
        }
        return toList(result);
      },
      nb::arg("outputs"), nb::arg("inputs"), nb::arg("grad_outputs").none(), nb::arg("retain_graph").none(),
      nb::arg("create_graph"), nb::arg("allow_unused"));
  // backplane.autograd.Function.apply's recording: `backward(grads)` is the
  // Python function that calls the user's backward (one gradient per result
  // in, one per forward argument out, None where there is none).
  m.def(
      "_record_function",
      [](const std::string& name, nb::handle inputs, nb::handle results, nb::object backward,
         nb::handle non_differentiable) {
        std::vector<Tensor> ins = tensorsFrom(inputs, "inputs"), outs = tensorsFrom(results, "results");
        auto ctx = std::make_shared<autograd::AutogradContext>();
        ctx->mark_non_differentiable(tensorsFrom(non_differentiable, "non_differentiable"));
        // The node may outlive this call and run on any thread: it holds the
        // Python callable and takes the GIL to call it.
        auto callable = std::shared_ptr<nb::object>(new nb::object(std::move(backward)), [](nb::object* o) {
          nb::gil_scoped_acquire acquire;
          delete o;
        });
        autograd::detail::recordCustomFunction(name, ctx, ins, outs,
                                               [callable](autograd::AutogradContext&, std::vector<Tensor> grads) {
                                                 nb::gil_scoped_acquire acquire;
                                                 nb::object r = (*callable)(toList(grads));
                                                 return tensorsFrom(r, "the gradients backward returned");
                                               });
        return toList(outs);
      },
      nb::arg("name"), nb::arg("inputs"), nb::arg("results"), nb::arg("backward"), nb::arg("non_differentiable"));
}

}  // namespace backplane::python
