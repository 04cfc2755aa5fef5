// A shared library that the test module depends on but the loader cannot find.
extern "C" __attribute__((visibility("default"))) int ember_fake_dep_value() { return 1; }
