#pragma once
// Programmatic dependent launch (sm_90+), shared by the kernels and the engine's layer kernels.
// A kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while the
// kernel before it in the stream is still running, once that kernel's blocks have all called
// allow_next_grid() (or exited). It may do anything that does not depend on that kernel's output
// (the NVFP4 linears fetch their first weights) and must call wait_for_previous_grid() before
// touching memory the previous kernel writes or reads: the wait returns once that kernel has
// finished and its writes are visible. Both are no-ops before sm_90 and in kernels launched
// without the attribute.

namespace nibble::kernels {

__device__ inline void wait_for_previous_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ inline void allow_next_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
}

}  // namespace nibble::kernels
