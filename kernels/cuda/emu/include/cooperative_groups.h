// Shadows NVIDIA's header in emulated builds (kernels/cuda/emu/README.md).
#error "the ember CUDA emulator does not support cooperative groups (cooperative_groups.h)"
