// SPDX-License-Identifier: MIT
// The CUDA backend, host side. Its kernels are compiled (src/cuda, linked through meson's
// gk_cuda_dep, which also defines GK_WITH_CUDA); this header is what an engine includes.
//
// Discovery never fails: no driver, no device, or a device this build has no kernel image
// for gives fewer devices, named on stderr in the last case. Each device registered has
// passed an empty launch of this build's code.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gk/backend.hpp"

namespace gk {
struct device_info;
}

namespace gk::cuda {

// The devices this build can run on (probed). Registered with gk::devices() through a
// discoverer when GK_WITH_CUDA is defined (registry.hpp).
std::vector<device_info> discover();

// The architectures this build's device code was compiled for ("sm_80 sm_90 compute_120").
std::string architectures_built();

// Memory on CUDA device `device` (one buffer type per device, process-wide).
buffer_type& device_buffer_type(int device = 0);

// A backend computing on `device`. Throws gk::error if the device cannot run this build.
std::unique_ptr<backend> make_backend(int device = 0);

// Number of devices discover() registers (0 on a machine without a usable GPU).
int device_count();

}  // namespace gk::cuda
