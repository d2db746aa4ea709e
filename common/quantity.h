// Kubernetes quantities ("2", "500m", "4Gi", "16G") as whole units. Used by the planner
// (coordinator/resources.h) and by Kueue's quotas (common/kueue/), so it lives below both.
// Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace trainlet {

// The largest amount a quantity may come to, in its unit (2^62).
inline constexpr int64_t kMaxQuantityUnits = int64_t{1} << 62;

// A Kubernetes quantity: a decimal number (sign, digits, optional fraction, optional exponent
// "e3"/"E-2") with an optional suffix: binary Ki Mi Gi Ti Pi Ei, or decimal n u m k M G T P E.
// Returns the value times `scale` (1000 for cpu in millicores, 1 for everything else), rounded
// up to a whole unit as Kubernetes rounds requests. Errors (kInvalid) quote the text:
// "\"4GB\" is not a quantity (number with suffix Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P
// or E)"; negative values and values over 2^62 are refused.
Result<int64_t> ParseQuantity(std::string_view text, int64_t scale = 1);

}  // namespace trainlet
