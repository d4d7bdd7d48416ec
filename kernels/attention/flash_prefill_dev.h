#pragma once
// The flash prefill forms that lost their A/B (kernels/attention/PERF_NOTES.md v3, v4): the 32-key
// chunks at head_dim 128, the exact (non-fast) softmax, the eager rescale. They stay for the A/B
// benchmarks and the tests (test_attention_gpu, its --bench), in the dev library
// (nibble::kernels_dev), not in the engine's.
namespace nibble::kernels {

// Makes every kFlash* options mask launchable through paged_attention(); before, a mask outside
// the device defaults' forms answers cudaErrorNotSupported. Call once, before any launch.
void flash_enable_dev_forms();

}  // namespace nibble::kernels
