// A fresh CURVE key pair for a test; the test fails (and gets empty keys) if none can be made.
#pragma once

#include <gtest/gtest.h>

#include "common/curve_keys.h"

namespace trainlet::testing {

inline CurveKeyPair NewKeys() {
  auto keys = GenerateCurveKeyPair();
  EXPECT_TRUE(keys.ok()) << keys.status().ToString();
  return keys.ok() ? *keys : CurveKeyPair{};
}

}  // namespace trainlet::testing
