// Note [cuBLAS products]
// The CUDA plugin's float32, float16, bfloat16 and float64 products run on
// cuBLAS (linalg.cu sends the rest to the tiled kernel, Note [Tiled GEMM]).
//   * One call per product: cublasGemmEx, or cublasGemmStridedBatchedEx for
//     a batch (a broadcast operand has batch stride 0). float16 and bfloat16
//     accumulate in float32 (CUBLAS_COMPUTE_32F), float32 in float32 or, when
//     allowed, TF32 (CUBLAS_COMPUTE_32F_FAST_TF32, Note [TF32 matrix
//     products]), float64 in float64 (CUBLAS_COMPUTE_64F, the same
//     arithmetic as cublasDgemm, through the same call as the others).
//   * Layout: cuBLAS is column-major. A row-major C is computed as its
//     transpose, C^T = B^T A^T, which swaps the operands and reads each
//     transposed: no data moves. Each operand is then passed as is
//     (CUBLAS_OP_N, column-major) or transposed (CUBLAS_OP_T, row-major)
//     with its leading dimension, so transposed views need no copy;
//     linalg.cu packs operands in any other layout first.
//   * Handles: one per host thread and device (Note [Per-thread library
//     handles] in thread_handles.h).
//
// Note [Libraries opened on first use]
// cuBLAS is not linked: the first product opens libcublas.so.<major> (the
// major version of the cublas_v2.h the plugin was built with; the file
// BACKPLANE_CUBLAS_LIBRARY names, when set) and resolves the few functions
// the plugin calls. Loading the plugin then maps neither libcublas nor
// libcublasLt (~600 MB, ~60 ms to relocate), which a process that never
// multiplies matrices on the GPU, or has no GPU, would pay for nothing. A
// test holds that (GpuPluginLoad.LoadingMapsNeitherCublasNorCudnn). NCCL is opened the
// same way (nccl_engine.cu). A missing cuBLAS fails the product that needed
// it, naming the files tried and what to install.
#include <cublas_v2.h>

#include <climits>
#include <cstdint>
#include <string>
#include <utility>

#include "cublas_gemm.h"
#include "cuda/cuda_libraries.h"
#include "cuda/thread_handles.h"

namespace bp_gpu {
namespace {

#define BP_CUBLAS_STR(x) #x
#define BP_CUBLAS_XSTR(x) BP_CUBLAS_STR(x)

// The cuBLAS functions the plugin calls, resolved from the library once
// (Note [Libraries opened on first use]). cublas_v2.h maps some names to
// their _v2 symbols (cublasCreate -> cublasCreate_v2): BP_CUBLAS_XSTR gives
// the symbol.
struct CublasApi {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasSetStream) setStream = nullptr;
  // The C functions (the header adds C++ overloads of these two).
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                  const void*, const void*, cudaDataType, int, long long, const void*,
                                                  cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                  long long, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmEx gemmEx = nullptr;
  GemmStridedBatchedEx gemmStridedBatchedEx = nullptr;
  decltype(&cublasGetStatusName) statusName = nullptr;
  decltype(&cublasGetStatusString) statusString = nullptr;
  std::string unavailable;  // why cuBLAS cannot be used; empty when it can
};

CublasApi loadCublas() {
  CublasApi api;
  std::string opened;
  void* lib = bp_cuda::openLibrary("cuBLAS", "BACKPLANE_CUBLAS_LIBRARY", "libcublas.so." BP_CUBLAS_XSTR(CUBLAS_VER_MAJOR),
                                   "install the CUDA toolkit's cuBLAS " BP_CUBLAS_XSTR(
                                       CUBLAS_VER_MAJOR) ", put its directory on LD_LIBRARY_PATH, or name the file "
                                                         "in BACKPLANE_CUBLAS_LIBRARY",
                                   &opened, &api.unavailable);
  if (lib == nullptr) return api;
  using bp_cuda::resolve;
  const bool ok = resolve(lib, BP_CUBLAS_XSTR(cublasCreate), api.create) &&
                  resolve(lib, BP_CUBLAS_XSTR(cublasSetStream), api.setStream) &&
                  resolve(lib, BP_CUBLAS_XSTR(cublasGemmEx), api.gemmEx) &&
                  resolve(lib, BP_CUBLAS_XSTR(cublasGemmStridedBatchedEx), api.gemmStridedBatchedEx) &&
                  resolve(lib, BP_CUBLAS_XSTR(cublasGetStatusName), api.statusName) &&
                  resolve(lib, BP_CUBLAS_XSTR(cublasGetStatusString), api.statusString);
  if (!ok)
    api.unavailable = "the cuBLAS library " + opened + " lacks functions of cuBLAS " BP_CUBLAS_XSTR(CUBLAS_VER_MAJOR);
  return api;
}

// The API, opened on the first call; throws when cuBLAS cannot be used.
const CublasApi& cublas() {
  static const CublasApi api = loadCublas();
  if (!api.unavailable.empty())
    bp::fail(BP_FAILED_PRECONDITION, "matrix products on " BP_GPU_NAME " need cuBLAS: " + api.unavailable);
  return api;
}

void checkCublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  bp::fail(status == CUBLAS_STATUS_ALLOC_FAILED ? BP_RESOURCE_EXHAUSTED : BP_INTERNAL,
           bp::detail::concat(what, ": ", cublas().statusName(status), ": ", cublas().statusString(status)));
}

struct CublasHandles {
  using Handle = cublasHandle_t;
  static Handle create() {
    Handle h = nullptr;
    checkCublas(cublas().create(&h), "cublasCreate");
    return h;
  }
  static void bind(Handle h, gpuStream_t stream) { checkCublas(cublas().setStream(h, stream), "cublasSetStream"); }
};

// m read as it is (column-major: N) or transposed (row-major: T), and its
// leading dimension.
std::pair<cublasOperation_t, int64_t> operation(const MatrixView& m) {
  return m.sr == 1 ? std::pair{CUBLAS_OP_N, m.sc} : std::pair{CUBLAS_OP_T, m.sr};
}

MatrixView transposed(MatrixView m) {
  std::swap(m.rows, m.cols);
  std::swap(m.sr, m.sc);
  return m;
}

bool fitsInt(std::initializer_list<int64_t> values) {
  for (int64_t v : values)
    if (v > INT_MAX) return false;
  return true;
}

}  // namespace

bool cublasTakes(bp::ScalarType dtype) {
  return dtype == bp::ScalarType::Float32 || dtype == bp::ScalarType::Float16 || dtype == bp::ScalarType::BFloat16 ||
         dtype == bp::ScalarType::Float64;
}

bool cublasGemm(MatrixView a, MatrixView b, MatrixView c, bp::ScalarType dtype, const GemmScalars& s, bool allow_tf32,
                int device) {
  if (c.sc == 1) {  // row-major C (blasLayout): compute C^T = B^T A^T
    const MatrixView at = transposed(a);
    a = transposed(b);
    b = at;
    c = transposed(c);
  }
  const auto [op_a, lda] = operation(a);
  const auto [op_b, ldb] = operation(b);
  const int64_t ldc = c.sc;
  if (!fitsInt({c.rows, c.cols, a.cols, lda, ldb, ldc, c.batch})) return false;

  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (dtype == bp::ScalarType::Float16 || dtype == bp::ScalarType::BFloat16) {
    type = dtype == bp::ScalarType::Float16 ? CUDA_R_16F : CUDA_R_16BF;
    compute = CUBLAS_COMPUTE_32F;
  } else if (dtype == bp::ScalarType::Float64) {
    type = CUDA_R_64F;
    compute = CUBLAS_COMPUTE_64F;
  }
  // The scale type is the compute type's: double for float64, else float.
  const double alpha64 = s.alpha, beta64 = s.use_beta ? s.beta : 0.0;
  const float alpha32 = static_cast<float>(alpha64), beta32 = static_cast<float>(beta64);
  const bool wide = compute == CUBLAS_COMPUTE_64F;
  const void* alpha = wide ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = wide ? static_cast<const void*>(&beta64) : &beta32;

  DeviceGuard guard(device);
  const gpuStream_t stream = currentStream(device);
  const cublasHandle_t handle = ThreadHandles<CublasHandles>::forThread(device, stream);
  const int m = static_cast<int>(c.rows), n = static_cast<int>(c.cols), k = static_cast<int>(a.cols);
  if (c.batch == 1) {
    checkCublas(
        cublas().gemmEx(handle, op_a, op_b, m, n, k, alpha, a.data, type, static_cast<int>(lda), b.data, type,
                        static_cast<int>(ldb), beta, c.data, type, static_cast<int>(ldc), compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  } else {
    checkCublas(cublas().gemmStridedBatchedEx(handle, op_a, op_b, m, n, k, alpha, a.data, type, static_cast<int>(lda),
                                              a.sb, b.data, type, static_cast<int>(ldb), b.sb, beta, c.data, type,
                                              static_cast<int>(ldc), c.sb, static_cast<int>(c.batch), compute,
                                              CUBLAS_GEMM_DEFAULT),
                "cublasGemmStridedBatchedEx");
  }
  return true;
}

}  // namespace bp_gpu
