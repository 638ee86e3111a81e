// Package install points go-nvml's constructor at the mock NVML of package nvmock. The nvidia tier's build
// (tools/nvidia/build) compiles the real NVIDIA binaries with `go build -overlay` that (a) adds the hook
// variable MockNew to go-nvml's nvml package and makes nvml.New return MockNew() when it is set, and (b) adds
// one file importing this package to each binary's main package. No upstream file is edited in place.
package install

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"local.invalid/nvmock"
)

func init() {
	nvml.MockNew = func() nvml.Interface { return nvmock.FromEnv() }
}
