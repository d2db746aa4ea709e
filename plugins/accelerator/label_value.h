// Kubernetes label values from free text (model names): at most 63 characters of [A-Za-z0-9._-],
// starting and ending with an alphanumeric; anything else becomes '-', runs collapsed, as
// NVIDIA's GPU feature discovery writes nvidia.com/gpu.product ("NVIDIA-H100-80GB-HBM3").
#pragma once

#include <string>
#include <string_view>

namespace trainlet::accelerator {

std::string LabelValue(std::string_view text);

}  // namespace trainlet::accelerator
