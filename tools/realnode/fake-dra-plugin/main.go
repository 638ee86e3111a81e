// fake-dra-plugin is a DRA kubelet plugin for fake GPUs, built on the library the NVIDIA DRA driver is built on
// (k8s.io/dynamic-resource-allocation kubeletplugin + resourceslice). It publishes, as driver gpu.nvidia.com,
// one pool named after the node in one ResourceSlice, devices shaped like the NVIDIA driver's full GPUs
// (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/deviceinfo.go, nvlib.go: name
// gpu-<minor>; attributes type, uuid, productName, brand, architecture, cudaComputeCapability, driverVersion,
// cudaDriverVersion, resource.kubernetes.io/pciBusID; capacity memory in bytes). Prepare writes one CDI spec
// per claim (kind k8s.gpu.nvidia.com/claim, device = claim UID, as the library's docs advise against reusing
// names) that sets NVIDIA_VISIBLE_DEVICES to the allocated UUIDs and bind-mounts a host file at each
// /dev/nvidia<minor>; containerd 2.x injects it (CDI on by default since v2.0.0).
//
// It runs only while the Node carries nvidia.com/dra-kubelet-plugin=true (the GPU Operator's documented
// recipe), or always with --label="" (the chart's default placement). Like the real driver it never deletes
// its slices on stop: the kubelet wipes them 30 s after the plugin goes (k8s.io/kubernetes v1.37.2
// pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go, defaultWipingDelay).
//
// While the file named by --fail-prepare-file exists, every prepare fails: the failing canary's lever.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"local.invalid/realnode/fakegpu"
)

const driverName = "gpu.nvidia.com"

type config struct {
	node, kubeletDir, cdiDir, failFile string
	product, brand, arch, cc, driver   string
	cuda, memory                       string
}

type driver struct {
	cfg    config
	client kubernetes.Interface
	gpus   []fakegpu.GPU

	mu     sync.Mutex
	helper *kubeletplugin.Helper
}

func str(s string) resourceapi.DeviceAttribute  { return resourceapi.DeviceAttribute{StringValue: &s} }
func vers(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{VersionValue: &s} }

func (d *driver) devices() []resourceapi.Device {
	mem := resource.MustParse(d.cfg.memory)
	out := make([]resourceapi.Device, 0, len(d.gpus))
	for _, g := range d.gpus {
		out = append(out, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", g.Minor),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":                            str("gpu"),
				"uuid":                            str(g.UUID),
				"productName":                     str(d.cfg.product),
				"brand":                           str(d.cfg.brand),
				"architecture":                    str(d.cfg.arch),
				"cudaComputeCapability":           vers(d.cfg.cc),
				"driverVersion":                   vers(d.cfg.driver),
				"cudaDriverVersion":               vers(d.cfg.cuda),
				"resource.kubernetes.io/pciBusID": str(fmt.Sprintf("0000:%02x:00.0", 0x10+g.Minor)),
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: mem}},
		})
	}
	return out
}

func (d *driver) Start(ctx context.Context) error {
	node, err := d.client.CoreV1().Nodes().Get(ctx, d.cfg.node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pluginDir := filepath.Join(d.cfg.kubeletDir, "plugins", driverName)
	if err := os.MkdirAll(pluginDir, 0o750); err != nil {
		return err
	}
	h, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(driverName),
		kubeletplugin.KubeClient(d.client),
		kubeletplugin.NodeName(d.cfg.node),
		kubeletplugin.NodeUID(node.UID),
		kubeletplugin.RegistrarDirectoryPath(filepath.Join(d.cfg.kubeletDir, "plugins_registry")),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
	)
	if err != nil {
		return err
	}
	res := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		d.cfg.node: {Slices: []resourceslice.Slice{{Devices: d.devices()}}},
	}}
	if err := h.PublishResources(ctx, res); err != nil {
		h.Stop()
		return err
	}
	d.mu.Lock()
	d.helper = h
	d.mu.Unlock()
	klog.InfoS("DRA plugin started", "driver", driverName, "devices", len(d.gpus))
	return nil
}

func (d *driver) Stop() {
	d.mu.Lock()
	h := d.helper
	d.helper = nil
	d.mu.Unlock()
	h.Stop()
}

type cdiSpec struct {
	CDIVersion string      `json:"cdiVersion"`
	Kind       string      `json:"kind"`
	Devices    []cdiDevice `json:"devices"`
}
type cdiDevice struct {
	Name           string         `json:"name"`
	ContainerEdits map[string]any `json:"containerEdits"`
}

const cdiKind = "k8s.gpu.nvidia.com/claim"

func (d *driver) specFile(uid types.UID) string {
	return filepath.Join(d.cfg.cdiDir, fmt.Sprintf("k8s.gpu.nvidia.com-claim_%s.json", uid))
}

func (d *driver) prepare(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	if d.cfg.failFile != "" {
		if _, err := os.Stat(d.cfg.failFile); err == nil {
			return kubeletplugin.PrepareResult{Err: errors.New("fake GPU prepare failure injected (" + d.cfg.failFile + " exists)")}
		}
	}
	byName := map[string]fakegpu.GPU{}
	for _, g := range d.gpus {
		byName[fmt.Sprintf("gpu-%d", g.Minor)] = g
	}
	var uuids []string
	var mounts []map[string]any
	var devs []kubeletplugin.Device
	cdiID := cdiKind + "=" + string(claim.UID)
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != driverName {
			continue
		}
		g, ok := byName[r.Device]
		if !ok || r.Pool != d.cfg.node {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("device %s/%s is not on this node", r.Pool, r.Device)}
		}
		uuids = append(uuids, g.UUID)
		mounts = append(mounts, map[string]any{
			"hostPath": g.DevFile, "containerPath": fmt.Sprintf("/dev/nvidia%d", g.Minor), "options": []string{"ro", "bind"},
		})
		devs = append(devs, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device, CDIDeviceIDs: []string{cdiID}})
	}
	spec := cdiSpec{CDIVersion: "0.6.0", Kind: cdiKind, Devices: []cdiDevice{{
		Name:           string(claim.UID),
		ContainerEdits: map[string]any{"env": []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ",")}, "mounts": mounts},
	}}}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err == nil {
		err = os.MkdirAll(d.cfg.cdiDir, 0o755)
	}
	if err == nil {
		tmp := d.specFile(claim.UID) + ".tmp"
		if err = os.WriteFile(tmp, data, 0o644); err == nil {
			err = os.Rename(tmp, d.specFile(claim.UID))
		}
	}
	if err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	klog.InfoS("prepared", "claim", klog.KObj(claim), "uuids", uuids)
	return kubeletplugin.PrepareResult{Devices: devs}
}

func (d *driver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		out[c.UID] = d.prepare(c)
	}
	return out, nil
}

func (d *driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		err := os.Remove(d.specFile(c.UID))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		out[c.UID] = err
	}
	return out, nil
}

func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
}

func (d *driver) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

func main() {
	klog.InitFlags(nil)
	var cfg config
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the plugin's client")
	flag.StringVar(&cfg.node, "node", "", "Node name")
	count := flag.Int("devices", 2, "number of fake GPUs")
	devDir := flag.String("dev-dir", "", "directory of the files standing for /dev/nvidiaN (shared with the device plugin)")
	flag.StringVar(&cfg.kubeletDir, "kubelet-dir", "/var/lib/kubelet", "the kubelet's --root-dir")
	flag.StringVar(&cfg.cdiDir, "cdi-dir", "/var/run/cdi", "a CDI spec directory containerd reads")
	flag.StringVar(&cfg.failFile, "fail-prepare-file", "", "every prepare fails while this file exists")
	flag.StringVar(&cfg.product, "product", "NVIDIA A100-SXM4-40GB", "productName")
	flag.StringVar(&cfg.brand, "brand", "Nvidia", "brand")
	flag.StringVar(&cfg.arch, "architecture", "Ampere", "architecture")
	flag.StringVar(&cfg.cc, "compute-capability", "8.0.0", "cudaComputeCapability")
	flag.StringVar(&cfg.driver, "driver-version", "580.95.5", "driverVersion")
	flag.StringVar(&cfg.cuda, "cuda-driver-version", "13.0.0", "cudaDriverVersion")
	flag.StringVar(&cfg.memory, "memory", "40960Mi", "capacity memory")
	label := flag.String("label", "nvidia.com/dra-kubelet-plugin", "run only while the Node has this label = true (empty: always)")
	interval := flag.Duration("poll", time.Second, "how often the Node's labels are read")
	flag.Parse()
	if cfg.node == "" || *kubeconfig == "" || *devDir == "" {
		klog.Exit("--node, --kubeconfig and --dev-dir are required")
	}
	if _, err := resource.ParseQuantity(cfg.memory); err != nil {
		klog.Exit(fmt.Errorf("--memory: %w", err))
	}
	gpus, err := fakegpu.GPUs(cfg.node, *count, *devDir)
	if err != nil {
		klog.Exit(err)
	}
	client, err := fakegpu.Client(*kubeconfig)
	if err != nil {
		klog.Exit(err)
	}
	d := &driver{cfg: cfg, client: client, gpus: gpus}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	fakegpu.RunWhileLabelled(ctx, client, cfg.node, *label, "true", *interval, d)
}
