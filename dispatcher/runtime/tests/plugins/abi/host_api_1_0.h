/*
 * BP_HostApi as ABI 1.0 defined it: the table a plugin built against the 1.0
 * SDK knows (today's BP_HostApi without the fields 1.1 appended). Only
 * tp_abi_v1_0 uses it as its host table; abi_rules_test.cc checks that it is
 * a prefix of today's table (Note [ABI rules]: tables are append-only).
 * Plain C; the other types it names are unchanged since 1.0.
 */
#ifndef BACKPLANE_TESTS_PLUGINS_ABI_HOST_API_1_0_H_
#define BACKPLANE_TESTS_PLUGINS_ABI_HOST_API_1_0_H_

#include <stddef.h>
#include <stdint.h>

#include "backplane/plugin_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct BP_HostApi_1_0 {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  BP_Error* (*error_new)(BP_ErrorCode code, const char* message);
  void (*error_free)(BP_Error* error);
  BP_ErrorCode (*error_code)(const BP_Error* error);
  const char* (*error_message)(const BP_Error* error);
  void (*log)(BP_Plugin* plugin, BP_LogLevel level, const char* message);
  BP_Error* (*register_device_type)(BP_Plugin* plugin, const BP_DeviceTypeDesc* desc, int32_t* out_device_type);
  BP_Error* (*def)(BP_Plugin* plugin, const char* schema);
  BP_Error* (*impl)(BP_Plugin* plugin, const char* op, int32_t device_type, const BP_KernelDesc* kernel);
  BP_Error* (*fallback)(BP_Plugin* plugin, int32_t device_type, const BP_KernelDesc* kernel);
  BP_Error* (*device_type_find)(const char* name, int32_t* out_device_type);
  void (*tensor_info)(const BP_Tensor* tensor, BP_TensorInfo* out);
  BP_Tensor* (*tensor_retain)(BP_Tensor* tensor);
  void (*tensor_release)(BP_Tensor* tensor);
  BP_Error* (*tensor_empty)(const int64_t* sizes, size_t ndim, const int64_t* strides, BP_ScalarType dtype,
                            BP_Device device, BP_Tensor** out);
  BP_Error* (*tensor_view)(BP_Tensor* base, const int64_t* sizes, const int64_t* strides, size_t ndim,
                           int64_t storage_offset, BP_Tensor** out);
  BP_Error* (*op_find)(const char* qualified_name, const BP_Operator** out);
  const char* (*op_name)(const BP_Operator* op);
  BP_Error* (*op_call)(const BP_Operator* op, const BP_Value* args, size_t num_args, BP_Value* returns,
                       size_t num_returns);
  BP_Error* (*op_redispatch)(const BP_Operator* op, uint64_t dispatch_keys, const BP_Value* args, size_t num_args,
                             BP_Value* returns, size_t num_returns);
} BP_HostApi_1_0;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BACKPLANE_TESTS_PLUGINS_ABI_HOST_API_1_0_H_ */
