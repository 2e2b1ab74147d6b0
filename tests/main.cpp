// Minimal doctest main. The Vulkan team will replace this with a device-aware main.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
