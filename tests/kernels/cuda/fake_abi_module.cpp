// A module from some other build: it exports the ABI query with a version this program does
// not speak, and nothing else. The loader must refuse it before calling anything else.
extern "C" __attribute__((visibility("default"))) int ember_cuda_abi_version() { return 999; }
extern "C" __attribute__((visibility("default"))) int ember_cuda_device_count(char*, unsigned long) { return 1; }
