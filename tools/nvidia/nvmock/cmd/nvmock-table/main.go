// nvmock-table prints the GPUs of the node setup named by DRA_MIGRATE_NVML_SETUP as "<minor> <uuid> <name>"
// lines, from the same mock NVML the real binaries see: tools/nvidia/stack bakes them into the driver root's
// nvidia-smi stand-in (what the DRA driver's CDI spec mounts into a container).
package main

import (
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"local.invalid/nvmock"
)

func main() {
	lib := nvmock.FromEnv()
	n, _ := lib.DeviceGetCount()
	for i := 0; i < n; i++ {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			fmt.Fprintf(os.Stderr, "nvmock-table: GPU %d: %v\n", i, ret)
			os.Exit(1)
		}
		minor, _ := d.GetMinorNumber()
		uuid, _ := d.GetUUID()
		name, _ := d.GetName()
		fmt.Printf("%d %s %s\n", minor, uuid, name)
	}
}
