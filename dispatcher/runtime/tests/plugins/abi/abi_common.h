/*
 * Helpers shared by the plain-C test plugins of abi_rules_test.cc, against
 * plugin_api.h only. Each plugin is its own shared library, so these statics
 * are per plugin.
 */
#ifndef BACKPLANE_TESTS_PLUGINS_ABI_ABI_COMMON_H_
#define BACKPLANE_TESTS_PLUGINS_ABI_ABI_COMMON_H_

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/plugin_api.h"

/* The host table, saved by init. */
static const BP_HostApi* abi_host = NULL;

/* A device type that can be registered but holds nothing: one device, and
 * every allocation and copy fails. */
static inline int32_t abi_null_device_count(void* ctx) {
  (void)ctx;
  return 1;
}
static inline BP_Error* abi_null_allocate(void* ctx, int32_t device, size_t nbytes, void** out) {
  (void)ctx, (void)device, (void)nbytes, (void)out;
  return abi_host->error_new(BP_RESOURCE_EXHAUSTED, "this test device holds no memory");
}
static inline void abi_null_deallocate(void* ctx, int32_t device, void* ptr) { (void)ctx, (void)device, (void)ptr; }
static inline BP_Error* abi_null_copy(void* ctx, int32_t device, void* dst, const void* src, size_t nbytes) {
  (void)ctx, (void)device, (void)dst, (void)src, (void)nbytes;
  return abi_host->error_new(BP_INTERNAL, "this test device holds no memory");
}

/* A table with every required slot set and every optional one NULL. */
static inline BP_DeviceTypeDesc abi_null_device_desc(const char* name) {
  BP_DeviceTypeDesc d;
  memset(&d, 0, sizeof d);
  d.struct_size = BP_DeviceTypeDesc_STRUCT_SIZE;
  d.name = name;
  d.device_count = abi_null_device_count;
  d.allocate = abi_null_allocate;
  d.deallocate = abi_null_deallocate;
  d.copy_host_to_device = abi_null_copy;
  d.copy_device_to_host = abi_null_copy;
  return d;
}

/* A device type whose memory is the heap (one device, host copies). */
static inline BP_Error* abi_heap_allocate(void* ctx, int32_t device, size_t nbytes, void** out) {
  (void)ctx, (void)device;
  *out = malloc(nbytes ? nbytes : 1);
  return *out ? NULL : abi_host->error_new(BP_RESOURCE_EXHAUSTED, "out of memory");
}
static inline void abi_heap_deallocate(void* ctx, int32_t device, void* ptr) {
  (void)ctx, (void)device;
  free(ptr);
}
static inline BP_Error* abi_heap_copy(void* ctx, int32_t device, void* dst, const void* src, size_t nbytes) {
  (void)ctx, (void)device;
  if (nbytes) memcpy(dst, src, nbytes);
  return NULL;
}
static inline BP_DeviceTypeDesc abi_heap_device_desc(const char* name) {
  BP_DeviceTypeDesc d = abi_null_device_desc(name);
  d.allocate = abi_heap_allocate;
  d.deallocate = abi_heap_deallocate;
  d.copy_host_to_device = abi_heap_copy;
  d.copy_device_to_host = abi_heap_copy;
  return d;
}

/* A kernel that must never run. */
static inline BP_Error* abi_unreachable_kernel(void* ctx, const BP_KernelCall* call) {
  (void)ctx, (void)call;
  return abi_host->error_new(BP_INTERNAL, "this test kernel must never be called");
}

static inline BP_KernelDesc abi_kernel_desc(BP_KernelFn fn) {
  BP_KernelDesc k;
  memset(&k, 0, sizeof k);
  k.struct_size = BP_KernelDesc_STRUCT_SIZE;
  k.fn = fn;
  return k;
}

#endif /* BACKPLANE_TESTS_PLUGINS_ABI_ABI_COMMON_H_ */
