#pragma once
// NIBBLE_HOST_DEVICE marks a function that the CPU references and the CUDA kernels share, so that
// both compute exactly the same thing from one definition (plain C++ where nvcc is not compiling).
#if defined(__CUDACC__)
#define NIBBLE_HOST_DEVICE __host__ __device__
#else
#define NIBBLE_HOST_DEVICE
#endif
