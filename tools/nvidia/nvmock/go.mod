module local.invalid/nvmock

go 1.24.0

// The NVML binding stays at the version each upstream module pins (tools/nvidia/build); the mock servers of
// go-nvml v0.13.4-1 are compiled against it as local.invalid/nvmlmock.
require (
	github.com/NVIDIA/go-nvml v0.13.0-1
	local.invalid/nvmlmock v0.0.0
)
