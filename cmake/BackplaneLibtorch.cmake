# libtorch, for the programs that compare with PyTorch: the differential
# tests (dispatcher/ops/tests/torch_parity), the training sample's parity
# test (samples/train) and the training-step benchmark (bench/). A test and
# benchmark dependency only: Debian's libtorch-dev (1.13, which
# scripts/setup.sh --tests installs); no product target links it. Debian
# ships TorchConfig.cmake, but it drags in Caffe2's whole configuration
# (protobuf, MKL-DNN, CUDA probing); these programs need only ATen's and the
# C++ frontend's headers and two libraries, found here directly.
#
# backplane_find_libtorch() defines the imported target backplane_libtorch
# when libtorch is found (once per build) and sets BACKPLANE_LIBTORCH_FOUND.
function(backplane_find_libtorch)
  if(TARGET backplane_libtorch)
    set(BACKPLANE_LIBTORCH_FOUND TRUE PARENT_SCOPE)
    return()
  endif()
  find_path(BACKPLANE_ATEN_INCLUDE_DIR ATen/ATen.h)
  find_library(BACKPLANE_TORCH_CPU_LIBRARY torch_cpu)
  find_library(BACKPLANE_C10_LIBRARY c10)
  if(NOT BACKPLANE_ATEN_INCLUDE_DIR OR NOT BACKPLANE_TORCH_CPU_LIBRARY OR NOT BACKPLANE_C10_LIBRARY)
    set(BACKPLANE_LIBTORCH_FOUND FALSE PARENT_SCOPE)
    return()
  endif()
  add_library(backplane_libtorch INTERFACE IMPORTED GLOBAL)
  target_include_directories(backplane_libtorch SYSTEM INTERFACE
    ${BACKPLANE_ATEN_INCLUDE_DIR} ${BACKPLANE_ATEN_INCLUDE_DIR}/torch/csrc/api/include)
  target_link_libraries(backplane_libtorch INTERFACE ${BACKPLANE_TORCH_CPU_LIBRARY} ${BACKPLANE_C10_LIBRARY})
  set(BACKPLANE_LIBTORCH_FOUND TRUE PARENT_SCOPE)
endfunction()
