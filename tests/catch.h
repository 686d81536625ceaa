// One include for Catch2 v2 (Debian 12's catch2 package) and v3 (newer systems and FetchContent).
// Tests include this and nothing else of Catch2.
#pragma once

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif

#include <string>

namespace fa_test {

// The message of the Exception that f() throws, or "" when it throws none (so that the test's own
// check of the message fails): what the tests of a refused input check, e.g. that it names the value
// and what is accepted.
template <class Exception, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace fa_test

// FA_SKIP("why"): ends the current test case as skipped, saying why. Catch2 3.3 and newer report it
// as skipped; Catch2 v2 has no skip, so there it ends the test case with a warning that says
// "SKIPPED: why" (visible in the output), never silently.
#if defined(SKIP)
#define FA_SKIP(why) SKIP(why)
#else
#define FA_SKIP(why)            \
  do {                          \
    WARN("SKIPPED: " << (why)); \
    return;                     \
  } while (false)
#endif
