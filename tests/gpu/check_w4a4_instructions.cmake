# Compiles kernels/nvfp4/w4a4_sm120.cu for sm_120a and sm_121a and checks that the PTX holds
# the block-scaled FP4 mma (kind::mxf4nvf4) and, where cuobjdump exists, that the SASS holds
# the matching OMMA.SF instruction. Inputs: NVCC, SOURCE, INCLUDE_DIR, WORK_DIR.
file(MAKE_DIRECTORY "${WORK_DIR}")
get_filename_component(cuda_bin "${NVCC}" DIRECTORY)
find_program(CUOBJDUMP cuobjdump HINTS "${cuda_bin}")
foreach(arch 120a 121a)
  execute_process(
    COMMAND "${NVCC}" -std=c++17 -I${INCLUDE_DIR} -gencode arch=compute_${arch},code=sm_${arch}
            -ptx "${SOURCE}" -o "${WORK_DIR}/w4a4_${arch}.ptx"
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nvcc -ptx for sm_${arch} failed (${rc}): ${err}")
  endif()
  file(READ "${WORK_DIR}/w4a4_${arch}.ptx" ptx)
  string(FIND "${ptx}" "kind::mxf4nvf4.block_scale" found)
  if(found EQUAL -1)
    message(FATAL_ERROR "sm_${arch}: PTX has no mma.sync ... kind::mxf4nvf4.block_scale")
  endif()
  message(STATUS "sm_${arch}: PTX holds the block-scaled FP4 mma")
  if(CUOBJDUMP)
    execute_process(
      COMMAND "${NVCC}" -std=c++17 -I${INCLUDE_DIR} -gencode arch=compute_${arch},code=sm_${arch}
              -cubin "${SOURCE}" -o "${WORK_DIR}/w4a4_${arch}.cubin"
      RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "nvcc -cubin for sm_${arch} failed (${rc}): ${err}")
    endif()
    execute_process(COMMAND "${CUOBJDUMP}" -sass "${WORK_DIR}/w4a4_${arch}.cubin"
                    OUTPUT_VARIABLE sass RESULT_VARIABLE rc)
    string(FIND "${sass}" "OMMA.SF" found)
    if(NOT rc EQUAL 0 OR found EQUAL -1)
      message(FATAL_ERROR "sm_${arch}: SASS has no OMMA.SF (block-scaled FP4 MMA)")
    endif()
    message(STATUS "sm_${arch}: SASS holds OMMA.SF")
  else()
    message(STATUS "cuobjdump not found next to ${NVCC}: SASS check skipped, PTX checked")
  endif()
endforeach()
