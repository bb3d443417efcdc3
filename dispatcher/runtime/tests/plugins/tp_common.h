/*
 * Helpers shared by the small test plugins of plugin_loader_test.cc. Plain C
 * against plugin_api.h only: each plugin is its own shared library, so these
 * statics are per plugin.
 */
#ifndef BACKPLANE_TESTS_PLUGINS_TP_COMMON_H_
#define BACKPLANE_TESTS_PLUGINS_TP_COMMON_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backplane/plugin_api.h"

/* The host table, saved by init. */
static const BP_HostApi* tp_host = NULL;

/* A device type that can be registered but holds nothing: every allocation
 * fails. `count` devices; `reason` for device_count() == 0. */
static int32_t tp_null_count_value = 1;
static const char* tp_null_reason_value = NULL;

static inline int32_t tp_null_device_count(void* ctx) {
  (void)ctx;
  return tp_null_count_value;
}
static inline const char* tp_null_unavailable_reason(void* ctx) {
  (void)ctx;
  return tp_null_reason_value;
}
static inline BP_Error* tp_null_allocate(void* ctx, int32_t device, size_t nbytes, void** out) {
  (void)ctx, (void)device, (void)nbytes, (void)out;
  return tp_host->error_new(BP_RESOURCE_EXHAUSTED, "this test device holds no memory");
}
static inline void tp_null_deallocate(void* ctx, int32_t device, void* ptr) { (void)ctx, (void)device, (void)ptr; }
static inline BP_Error* tp_null_copy(void* ctx, int32_t device, void* dst, const void* src, size_t nbytes) {
  (void)ctx, (void)device, (void)dst, (void)src, (void)nbytes;
  return tp_host->error_new(BP_INTERNAL, "this test device holds no memory");
}

static inline BP_DeviceTypeDesc tp_null_device_desc(const char* name) {
  BP_DeviceTypeDesc d;
  memset(&d, 0, sizeof d);
  d.struct_size = BP_DeviceTypeDesc_STRUCT_SIZE;
  d.name = name;
  d.host_accessible = 0;
  d.device_count = tp_null_device_count;
  d.unavailable_reason = tp_null_unavailable_reason;
  d.allocate = tp_null_allocate;
  d.deallocate = tp_null_deallocate;
  d.copy_host_to_device = tp_null_copy;
  d.copy_device_to_host = tp_null_copy;
  return d;
}

/* A kernel that must never run. */
static inline BP_Error* tp_unreachable_kernel(void* ctx, const BP_KernelCall* call) {
  (void)ctx, (void)call;
  return tp_host->error_new(BP_INTERNAL, "this test kernel must never be called");
}

static inline BP_KernelDesc tp_kernel_desc(BP_KernelFn fn) {
  BP_KernelDesc k;
  memset(&k, 0, sizeof k);
  k.struct_size = BP_KernelDesc_STRUCT_SIZE;
  k.fn = fn;
  return k;
}

#endif /* BACKPLANE_TESTS_PLUGINS_TP_COMMON_H_ */
