// One include for Catch2 v2 (Debian 12's catch2 package) and v3 (newer systems and FetchContent).
// Tests include this and nothing else of Catch2.
#pragma once

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif
