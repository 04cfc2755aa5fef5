// A module from some other build: it exports the ABI query with a version this program does
// not speak. The loader must refuse it before calling anything else.
// It also throws an ember::Error from hidden-visibility code, as the real module does, so the
// test can show such an exception is caught by type in the program (libstdc++ matches
// type_info by name across modules).
#include "kernels/common/error.h"

extern "C" __attribute__((visibility("default"))) int ember_cuda_abi_version() { return 999; }
extern "C" __attribute__((visibility("default"))) int ember_cuda_device_count(char*, unsigned long) { return 1; }
extern "C" __attribute__((visibility("default"))) void ember_test_throw_error() {
    throw ember::Error("thrown inside a module");
}
