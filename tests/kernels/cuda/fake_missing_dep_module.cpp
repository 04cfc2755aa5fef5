// A module that would be a valid Ember CUDA module, but needs libember_fake_dep.so, which is
// on no search path: dlopen() must fail naming it (as it would for a missing libcublas).
extern "C" int ember_fake_dep_value();
extern "C" __attribute__((visibility("default"))) int ember_cuda_abi_version() { return ember_fake_dep_value(); }
