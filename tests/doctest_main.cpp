// The one main() of every doctest executable (engine and kernel tests, no Qt).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
