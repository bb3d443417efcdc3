#pragma once
// Note [One registration list per family]
// The CPU and GPU plugins implement the same operator families under the
// same kernel names, so each family's list of (operator, kernel) pairs is
// written once, here, as a macro that a plugin expands inside its
// registration function, where the kernels (in the plugin's own anonymous
// namespace) are visible by name. An operator added to a family is added
// here and implemented by every plugin that expands the list; a plugin that
// lacks the kernel fails to compile instead of silently falling back.
// Operators only one plugin serves stay in that plugin's own function.
//
// Every list takes the plugin's bp::Library `m` and device type `type`.
// The elementwise list also takes BIND_HOT: how the kernels on the
// tiny-tensor path (add, sub, mul, div) are bound: BP_BIND_AT_COMPILE_TIME
// (bp::kernel<&f>(): a direct call inside the adapter, for a plugin whose
// small calls are dominated by dispatch) or BP_BIND_BY_POINTER. The lists of
// binary ops take OPERANDS: how their kernels take a 0-d CPU tensor operand
// (Note [CPU scalars as kernel arguments] in plugin_api.h):
// BP_OPERANDS_ON_DEVICE (the host puts it on the device first; the CPU
// plugin, whose tensors are all on the cpu) or BP_OPERANDS_TAKE_CPU_SCALARS
// (as it is: the GPU plugins' kernels read its value on the host).

#define BP_BIND_AT_COMPILE_TIME(FN) bp::kernel<&FN>()
#define BP_BIND_BY_POINTER(FN) bp::kernel(&FN)
#define BP_OPERANDS_ON_DEVICE(K) K
#define BP_OPERANDS_TAKE_CPU_SCALARS(K) (K).takingCpuScalars()

// The comparison `NAME` (eq, ne, ...) with bp_common::Cmp value `C`, both
// forms, from the plugin's compareTensorOut<C> and compareScalarOut<C>.
#define BP_REGISTER_COMPARISON(m, type, NAME, C, OPERANDS)                                              \
  m.impl(#NAME ".Tensor_out", type,                                                                     \
         OPERANDS(bp::kernel(+[](const bp::Tensor& s, const bp::Tensor& o, const bp::Tensor& out) {     \
           return compareTensorOut<C>("bp::" #NAME ".Tensor_out", s, o, out);                           \
         })));                                                                                          \
  m.impl(                                                                                               \
      #NAME ".Scalar_out", type, +[](const bp::Tensor& s, const bp::Scalar& o, const bp::Tensor& out) { \
        return compareScalarOut<C>("bp::" #NAME ".Scalar_out", s, o, out);                              \
      })

// plugins/{cpu,gpu}/elementwise.*
#define BP_REGISTER_ELEMENTWISE_KERNELS(m, type, BIND_HOT, OPERANDS)              \
  do {                                                                            \
    m.impl("add.out", type, OPERANDS(BIND_HOT(add_out)));                         \
    m.impl("sub.out", type, OPERANDS(BIND_HOT(sub_out)));                         \
    m.impl("mul.out", type, OPERANDS(BIND_HOT(mul_out)));                         \
    m.impl("div.out", type, OPERANDS(BIND_HOT(div_out)));                         \
    m.impl("maximum.out", type, OPERANDS(bp::kernel(&maximum_out)));              \
    m.impl("minimum.out", type, OPERANDS(bp::kernel(&minimum_out)));              \
    m.impl("pow.Tensor_Tensor_out", type, OPERANDS(bp::kernel(&pow_tensor_out))); \
    m.impl("pow.Tensor_Scalar_out", type, &pow_scalar_out);                       \
    BP_REGISTER_COMPARISON(m, type, eq, bp_common::Cmp::Eq, OPERANDS);            \
    BP_REGISTER_COMPARISON(m, type, ne, bp_common::Cmp::Ne, OPERANDS);            \
    BP_REGISTER_COMPARISON(m, type, lt, bp_common::Cmp::Lt, OPERANDS);            \
    BP_REGISTER_COMPARISON(m, type, le, bp_common::Cmp::Le, OPERANDS);            \
    BP_REGISTER_COMPARISON(m, type, gt, bp_common::Cmp::Gt, OPERANDS);            \
    BP_REGISTER_COMPARISON(m, type, ge, bp_common::Cmp::Ge, OPERANDS);            \
    m.impl("where.self_out", type, OPERANDS(bp::kernel(&where_out)));             \
    m.impl("neg.out", type, &neg_out);                                            \
    m.impl("abs.out", type, &abs_out);                                            \
    m.impl("relu.out", type, &relu_out);                                          \
    m.impl("exp.out", type, &exp_out);                                            \
    m.impl("log.out", type, &log_out);                                            \
    m.impl("sqrt.out", type, &sqrt_out);                                          \
    m.impl("rsqrt.out", type, &rsqrt_out);                                        \
    m.impl("sin.out", type, &sin_out);                                            \
    m.impl("cos.out", type, &cos_out);                                            \
    m.impl("tanh.out", type, &tanh_out);                                          \
    m.impl("sigmoid.out", type, &sigmoid_out);                                    \
    m.impl("silu.out", type, &silu_out);                                          \
    m.impl("gelu.out", type, &gelu_out);                                          \
    m.impl("clamp.out", type, &clamp_out);                                        \
  } while (false)

// plugins/{cpu,gpu}/elementwise_more.*
#define BP_REGISTER_ELEMENTWISE_MORE_KERNELS(m, type, OPERANDS)                     \
  do {                                                                              \
    m.impl("div.out_mode", type, OPERANDS(bp::kernel(&div_out_mode)));              \
    m.impl("floor_divide.out", type, OPERANDS(bp::kernel(&floor_divide_out)));      \
    m.impl("remainder.Tensor_out", type, OPERANDS(bp::kernel(&remainder_out)));     \
    m.impl("fmod.Tensor_out", type, OPERANDS(bp::kernel(&fmod_out)));               \
    m.impl("bitwise_and.Tensor_out", type, OPERANDS(bp::kernel(&bitwise_and_out))); \
    m.impl("bitwise_or.Tensor_out", type, OPERANDS(bp::kernel(&bitwise_or_out)));   \
    m.impl("bitwise_xor.Tensor_out", type, OPERANDS(bp::kernel(&bitwise_xor_out))); \
    m.impl("logical_and.out", type, OPERANDS(bp::kernel(&logical_and_out)));        \
    m.impl("logical_or.out", type, OPERANDS(bp::kernel(&logical_or_out)));          \
    m.impl("logical_xor.out", type, OPERANDS(bp::kernel(&logical_xor_out)));        \
    m.impl("floor.out", type, &floor_out);                                          \
    m.impl("ceil.out", type, &ceil_out);                                            \
    m.impl("trunc.out", type, &trunc_out);                                          \
    m.impl("round.out", type, &round_out);                                          \
    m.impl("round.decimals_out", type, &round_decimals_out);                        \
    m.impl("sign.out", type, &sign_out);                                            \
    m.impl("erf.out", type, &erf_out);                                              \
    m.impl("bitwise_not.out", type, &bitwise_not_out);                              \
    m.impl("logical_not.out", type, &logical_not_out);                              \
    m.impl("isnan.out", type, &isnan_out);                                          \
    m.impl("isinf.out", type, &isinf_out);                                          \
    m.impl("nan_to_num.out", type, &nan_to_num_out);                                \
    m.impl("leaky_relu.out", type, &leaky_relu_out);                                \
    m.impl("elu.out", type, &elu_out);                                              \
    m.impl("softplus.out", type, &softplus_out);                                    \
  } while (false)

// plugins/{cpu,gpu}/creation.*
#define BP_REGISTER_CREATION_KERNELS(m, type)               \
  do {                                                      \
    m.impl("fill_.Scalar", type, &fill_);                   \
    m.impl("arange.start_out", type, &arange_out);          \
    m.impl("_philox_uniform_", type, &philox_uniform_);     \
    m.impl("_philox_normal_", type, &philox_normal_);       \
    m.impl("_philox_bernoulli_", type, &philox_bernoulli_); \
    m.impl("_copy_on_device_", type, &copy_on_device_);     \
  } while (false)

// plugins/{cpu,gpu}/data_movement.*
#define BP_REGISTER_DATA_MOVEMENT_KERNELS(m, type)                   \
  do {                                                               \
    m.impl("cat.out", type, &cat_out);                               \
    m.impl("index_select.out", type, &index_select_out);             \
    m.impl("gather.out", type, &gather_out);                         \
    m.impl("scatter_add.out", type, &scatter_add_out);               \
    m.impl("scatter.src_out", type, &scatter_src_out);               \
    m.impl("masked_fill.Scalar_out", type, masked_fill_scalar_out);  \
    m.impl("masked_fill.Tensor_out", type, &masked_fill_tensor_out); \
  } while (false)

// plugins/{cpu,gpu}/reduction.*
#define BP_REGISTER_REDUCTION_KERNELS(m, type)                 \
  do {                                                         \
    m.impl("sum.IntList_out", type, &sum_out);                 \
    m.impl("mean.out", type, &mean_out);                       \
    m.impl("amax.out", type, &amax_out);                       \
    m.impl("amin.out", type, &amin_out);                       \
    m.impl("argmax.out", type, &argmax_out);                   \
    m.impl("argmin.out", type, &argmin_out);                   \
    m.impl("var.correction_out", type, &var_correction_out);   \
    m.impl("std.correction_out", type, &std_correction_out);   \
    m.impl("softmax.int_out", type, &softmax_int_out);         \
    m.impl("log_softmax.int_out", type, &log_softmax_int_out); \
    m.impl("prod.int_out", type, &prod_int_out);               \
    m.impl("prod.out", type, &prod_out);                       \
    m.impl("all.dims_out", type, &logical_dims_out<true>);     \
    m.impl("any.dims_out", type, &logical_dims_out<false>);    \
  } while (false)

// plugins/cpu/linalg.cc, plugins/gpu/linalg.cu
#define BP_REGISTER_LINALG_KERNELS(m, type) \
  do {                                      \
    m.impl("mm.out", type, &mm_out);        \
    m.impl("bmm.out", type, &bmm_out);      \
    m.impl("addmm.out", type, &addmm_out);  \
    m.impl("linear", type, &linear);        \
  } while (false)

// plugins/cpu/sort_scan_pad.cc, plugins/gpu/scan_pad.cu: cumsum, cumprod, flip and
// the pads.
#define BP_REGISTER_SCAN_PAD_KERNELS(m, type)                                                            \
  do {                                                                                                   \
    m.impl("cumsum.out", type, &cumsum_out);                                                             \
    m.impl("cumprod.out", type, &cumprod_out);                                                           \
    m.impl("flip.out", type, &flip_out);                                                                 \
    m.impl("constant_pad_nd.out", type, constant_pad_nd_out);                                            \
    for (const char* name : {"reflection_pad1d.out", "reflection_pad2d.out", "reflection_pad3d.out"})    \
      m.impl(name, type, edge_pad_out<bp_common::DimMap::kReflect>);                                     \
    for (const char* name : {"replication_pad1d.out", "replication_pad2d.out", "replication_pad3d.out"}) \
      m.impl(name, type, edge_pad_out<bp_common::DimMap::kReplicate>);                                   \
  } while (false)

// plugins/cpu/sort_scan_pad.cc, plugins/gpu/sort.cu: sort and topk
// (bp_common::sortValuesStable and topkValues over the plugin's sortLines).
#define BP_REGISTER_SORT_KERNELS(m, type)                   \
  do {                                                      \
    m.impl("sort.values_stable", type, sort_values_stable); \
    m.impl("topk.values", type, topk_values);               \
  } while (false)
