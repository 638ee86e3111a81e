// Package nvmock builds the NVML the nvidia tier's real NVIDIA binaries see: go-nvml's own mock servers
// (github.com/NVIDIA/go-nvml@v0.13.4-1 pkg/nvml/mock/server, the GPU tables of pkg/nvml/mock/gpus) in one of
// a few node setups, plus what the mock leaves out and the binaries need:
//
//   - MIG devices: the mock creates GPU and compute instances but has no MIG device handles
//     (GetMaxMigDeviceCount, GetMigDeviceHandleByIndex, IsMigDeviceHandle, GetAttributes, ...), which is how
//     go-nvlib (pkg/nvlib/device VisitMigDevices, mig_device.go GetProfile) and the DRA driver enumerate them;
//   - PCI bus IDs in GetPciInfo (the mock fills only the device ID) and a deterministic UUID per GPU, so the
//     device plugin, GPU Feature Discovery and the DRA driver (separate processes) agree on the same GPUs;
//   - every other NVML call answers ERROR_NOT_SUPPORTED instead of the generated mock's panic, as NVML does
//     for a feature a GPU lacks.
//
// The setup is chosen by DRA_MIGRATE_NVML_SETUP (see Setups); it is deterministic, so every nvml.New() in
// every process returns the same machine.
package nvmock

import (
	"fmt"
	"os"
	"reflect"
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"local.invalid/nvmlmock/gpus"
	"local.invalid/nvmlmock/server"
)

// GPU is one GPU of a setup: its model and, when MIG is on, the GPU instance profile IDs to create (nil: MIG
// off; empty non-nil: MIG on and no instances).
type GPU struct {
	Model gpus.Config
	MIG   []int
}

// An R580 driver (CUDA 13.0): the minimum of the GPU Operator's DRA workflow (cloud-native-docs
// gpu-operator/dra-intro-install.rst), which `plan` checks (driver-version-too-old); go-nvml's dgx mocks
// report 550.54.15.
// tools/nvidia/build names the driver root's libraries after it.
const (
	driverVersion     = "580.95.05"
	nvmlVersion       = "13.580.95.05"
	cudaDriverVersion = 13000
)

func named(c gpus.Config, name string) gpus.Config { c.Name = name; return c }

// The mock names its A100-SXM4-40GB "Mock NVIDIA A100-SXM4-40GB"; a real one says "NVIDIA A100-SXM4-40GB".
var a100 = named(gpus.A100_SXM4_40GB, "NVIDIA A100-SXM4-40GB")

func times(n int, g GPU) []GPU {
	out := make([]GPU, n)
	for i := range out {
		out[i] = g
	}
	return out
}

// GPU instance profile IDs (nvml.GPU_INSTANCE_PROFILE_*).
const (
	p1g = nvml.GPU_INSTANCE_PROFILE_1_SLICE
	p2g = nvml.GPU_INSTANCE_PROFILE_2_SLICE
	p3g = nvml.GPU_INSTANCE_PROFILE_3_SLICE
	p7g = nvml.GPU_INSTANCE_PROFILE_7_SLICE
)

// Setups are the node setups of issue 24 (and the tier's docs/nvidia-tier.md).
var Setups = map[string][]GPU{
	// 8 x A100-SXM4-40GB, MIG off.
	"a100": times(8, GPU{Model: a100}),
	// 8 x H100 80GB HBM3, MIG off.
	"h100": times(8, GPU{Model: gpus.H100_SXM5_80GB}),
	// A100 with mixed MIG: one 7g, one all-balanced (2 x 1g, 1 x 2g, 1 x 3g), one 7 x 1g, one MIG-enabled
	// GPU with no instances, the rest MIG off.
	"a100-mixed": append([]GPU{
		{Model: a100, MIG: []int{p7g}},
		{Model: a100, MIG: []int{p1g, p1g, p2g, p3g}},
		{Model: a100, MIG: []int{p1g, p1g, p1g, p1g, p1g, p1g, p1g}},
		{Model: a100, MIG: []int{}},
	}, times(4, GPU{Model: a100})...),
	// A GPU type that is not in dra-migrate's product table.
	"a30": times(4, GPU{Model: gpus.A30_PCIE_24GB}),
	// H200 with MIG: its profile names come from memory (go-nvlib), not from an A100/H100 table.
	"h200-mig": append([]GPU{
		{Model: gpus.H200_SXM5_141GB, MIG: []int{p1g, p1g, p2g, p3g}},
		{Model: gpus.H200_SXM5_141GB, MIG: []int{p7g}},
	}, times(2, GPU{Model: gpus.H200_SXM5_141GB})...),
}

// FromEnv returns the setup named by DRA_MIGRATE_NVML_SETUP (default a100).
func FromEnv() nvml.Interface {
	name := os.Getenv("DRA_MIGRATE_NVML_SETUP")
	if name == "" {
		name = "a100"
	}
	setup, ok := Setups[name]
	if !ok {
		names := make([]string, 0, len(Setups))
		for n := range Setups {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "nvmock: unknown DRA_MIGRATE_NVML_SETUP %q (one of %v)\n", name, names)
		os.Exit(2)
	}
	return New(name, setup)
}

// New builds the mock machine for one setup.
func New(name string, setup []GPU) nvml.Interface {
	models := make([]gpus.Config, len(setup))
	for i, g := range setup {
		models[i] = g.Model
	}
	s := server.NewServerWithGPUs(driverVersion, nvmlVersion, cudaDriverVersion, models...)
	for i, g := range setup {
		d := s.Devices[i].(*server.Device)
		d.UUID = fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", hash(name), i)
		d.PciBusID = fmt.Sprintf("0000:%02x:00.0", 0x10+i)
		completeDevice(d)
		if g.MIG != nil {
			d.MigMode = nvml.DEVICE_MIG_ENABLE
			createInstances(d, g.MIG)
		}
		fillUnsupported(&d.Device)
	}
	// The DRA driver initialises with InitWithFlags(INIT_FLAG_NO_GPUS) (cmd/gpu-kubelet-plugin/nvlib.go).
	s.InitWithFlagsFunc = func(uint32) nvml.Return { return nvml.SUCCESS }
	fillUnsupported(&s.Interface)
	fillUnsupported(&s.ExtendedInterface)
	return s
}

func hash(s string) uint32 {
	h := uint32(2166136261)
	for _, c := range []byte(s) {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// fillC copies s into a C char array (int8 or uint8, by go-nvml version), NUL-terminated.
func fillC[T ~int8 | ~uint8](dst []T, s string) {
	for i, c := range []byte(s) {
		if i < len(dst)-1 {
			dst[i] = T(c)
		}
	}
}

// completeDevice adds to a full GPU what the mock leaves out.
func completeDevice(d *server.Device) {
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var bus uint32
		fmt.Sscanf(d.PciBusID, "0000:%02x:00.0", &bus)
		p := nvml.PciInfo{Bus: bus, PciDeviceId: d.Config.PciDeviceId}
		fillC(p.BusId[:], d.PciBusID)
		fillC(p.BusIdLegacy[:], d.PciBusID[4:])
		return p, nvml.SUCCESS
	}
	d.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) {
		if len(d.Config.MIGProfiles.GpuInstanceProfiles) == 0 {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return int(d.Config.MIGProfiles.GpuInstanceProfiles[p1g].InstanceCount), nvml.SUCCESS
	}
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		migs := migDevices(d)
		if i < 0 || i >= len(migs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return migs[i], nvml.SUCCESS
	}
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		for _, gi := range sortedGpuInstances(d) {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	d.GetNameFunc = func() (string, nvml.Return) { return d.Config.Name, nvml.SUCCESS }
	d.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
	d.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) { return nvml.COMPUTEMODE_DEFAULT, nvml.SUCCESS }
	d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
	// Topology as on an HGX board: GPUs in pairs behind one PCIe switch, four per CPU socket. The device
	// plugin's preferred allocation (go-gpuallocator internal/links GetP2PLink) asks for it.
	d.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
		// `other` may be a go-nvlib wrapper around the mock device: ask it for its index.
		o, ret := other.GetIndex()
		switch {
		case ret != nvml.SUCCESS:
			return 0, ret
		case o == d.Index:
			return nvml.TOPOLOGY_INTERNAL, nvml.SUCCESS
		case o/2 == d.Index/2:
			return nvml.TOPOLOGY_SINGLE, nvml.SUCCESS
		case o/4 == d.Index/4:
			return nvml.TOPOLOGY_NODE, nvml.SUCCESS
		}
		return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
	}
}

// createInstances creates one GPU instance per profile ID, each at the first placement that is free, and one
// compute instance covering the whole GPU instance (what `nvidia-smi mig -cgi ... -C` and mig-parted do).
func createInstances(d *server.Device, profiles []int) {
	used := map[uint32]bool{}
	for _, pid := range profiles {
		info := d.Config.MIGProfiles.GpuInstanceProfiles[pid]
		var placement *nvml.GpuInstancePlacement
		for _, p := range d.Config.MIGProfiles.GpuInstancePlacements[pid] {
			free := true
			for s := p.Start; s < p.Start+p.Size; s++ {
				free = free && !used[s]
			}
			if free {
				p := p
				placement = &p
				break
			}
		}
		if placement == nil {
			panic(fmt.Sprintf("nvmock: no free placement for GPU instance profile %d on %s", pid, d.UUID))
		}
		for s := placement.Start; s < placement.Start+placement.Size; s++ {
			used[s] = true
		}
		gi, _ := d.CreateGpuInstanceWithPlacement(&info, placement)
		g := gi.(*server.GpuInstance)
		completeGpuInstance(g)
		var full nvml.ComputeInstanceProfileInfo
		for _, ci := range d.Config.MIGProfiles.ComputeInstanceProfiles[pid] {
			if ci.SliceCount > full.SliceCount {
				full = ci
			}
		}
		_, _ = g.CreateComputeInstance(&full)
	}
}

func completeGpuInstance(gi *server.GpuInstance) {
	gi.GetComputeInstanceByIdFunc = func(id int) (nvml.ComputeInstance, nvml.Return) {
		for ci := range gi.ComputeInstances {
			if int(ci.Info.Id) == id {
				return ci, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	fillUnsupported(&gi.GpuInstance)
}

func sortedGpuInstances(d *server.Device) []*server.GpuInstance {
	var out []*server.GpuInstance
	for gi := range d.GpuInstances {
		out = append(out, gi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Info.Id < out[j].Info.Id })
	return out
}

// migDevices returns the MIG device handles of a GPU in a stable order (by GPU instance, then compute
// instance), one per compute instance, as NVML's GetMigDeviceHandleByIndex does.
func migDevices(d *server.Device) []nvml.Device {
	var out []nvml.Device
	for _, gi := range sortedGpuInstances(d) {
		var cis []*server.ComputeInstance
		for ci := range gi.ComputeInstances {
			cis = append(cis, ci)
		}
		sort.Slice(cis, func(i, j int) bool { return cis[i].Info.Id < cis[j].Info.Id })
		for _, ci := range cis {
			out = append(out, migDevice(d, gi, ci, len(out)))
		}
	}
	return out
}

func migDevice(parent *server.Device, gi *server.GpuInstance, ci *server.ComputeInstance, index int) nvml.Device {
	giInfo := parent.Config.MIGProfiles.GpuInstanceProfiles[int(gi.Info.ProfileId)]
	ciInfo := parent.Config.MIGProfiles.ComputeInstanceProfiles[int(gi.Info.ProfileId)][int(ci.Info.ProfileId)]
	m := &mock.Device{}
	// Unique per parent, GPU instance and compute instance (the device plugin keys its devices by it).
	uuid := fmt.Sprintf("MIG-%s-%04x-4%03x-8%03x-000000000000", parent.UUID[4:12], parent.Index, gi.Info.Id, ci.Info.Id)
	m.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return true, nvml.SUCCESS }
	m.GetUUIDFunc = func() (string, nvml.Return) { return uuid, nvml.SUCCESS }
	m.GetDeviceHandleFromMigDeviceHandleFunc = func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS }
	m.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return int(gi.Info.Id), nvml.SUCCESS }
	m.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return int(ci.Info.Id), nvml.SUCCESS }
	m.GetIndexFunc = func() (int, nvml.Return) { return index, nvml.SUCCESS }
	m.GetNameFunc = func() (string, nvml.Return) { return parent.Config.Name, nvml.SUCCESS }
	m.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: giInfo.MemorySizeMB << 20}, nvml.SUCCESS
	}
	m.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) {
		return nvml.DeviceAttributes{
			MultiprocessorCount:       ciInfo.MultiprocessorCount,
			SharedCopyEngineCount:     ciInfo.SharedCopyEngineCount,
			SharedDecoderCount:        ciInfo.SharedDecoderCount,
			SharedEncoderCount:        ciInfo.SharedEncoderCount,
			SharedJpegCount:           ciInfo.SharedJpegCount,
			SharedOfaCount:            ciInfo.SharedOfaCount,
			GpuInstanceSliceCount:     giInfo.SliceCount,
			ComputeInstanceSliceCount: ciInfo.SliceCount,
			MemorySizeMB:              giInfo.MemorySizeMB,
		}, nvml.SUCCESS
	}
	m.GetCudaComputeCapabilityFunc = parent.GetCudaComputeCapabilityFunc
	m.GetPciInfoFunc = parent.GetPciInfoFunc
	m.GetArchitectureFunc = parent.GetArchitectureFunc
	m.GetBrandFunc = parent.GetBrandFunc
	fillUnsupported(m)
	return m
}

var returnType = reflect.TypeOf(nvml.SUCCESS)

// fillUnsupported sets every mock function the generated mock leaves nil (its method would panic) to one that
// returns zero values and ERROR_NOT_SUPPORTED, as NVML answers for a feature a device lacks.
func fillUnsupported(mockStruct any) {
	v := reflect.ValueOf(mockStruct).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := v.Field(i)
		if t.Field(i).Type.Kind() != reflect.Func || !f.IsNil() || !f.CanSet() {
			continue
		}
		ft := f.Type()
		f.Set(reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, ft.NumOut())
			for j := range out {
				out[j] = reflect.Zero(ft.Out(j))
				if ft.Out(j) == returnType {
					out[j] = reflect.ValueOf(nvml.ERROR_NOT_SUPPORTED)
				}
			}
			return out
		}))
	}
}
