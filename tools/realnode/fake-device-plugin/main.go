// fake-device-plugin advertises N fake nvidia.com/gpu devices to the kubelet over the device-plugin API
// v1beta1 (k8s.io/kubelet pkg/apis/deviceplugin/v1beta1: Register, ListAndWatch, Allocate), running only
// while the Node carries nvidia.com/gpu.deploy.device-plugin=true, as the GPU Operator's device-plugin
// DaemonSet does. On the label's removal it stops the way the NVIDIA plugin handles SIGTERM (stop the gRPC
// server, remove its socket: NVIDIA/k8s-device-plugin internal/plugin/server.go Stop), within the 30 s a
// DaemonSet pod gets by default.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"local.invalid/realnode/fakegpu"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource, socket, kubeletSocket string
	gpus                            []fakegpu.GPU
	grace                           time.Duration

	mu     sync.Mutex
	server *grpc.Server
	done   chan struct{} // closed on Stop: ends the ListAndWatch streams
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) devices() []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(p.gpus))
	for _, g := range p.gpus {
		out = append(out, &pluginapi.Device{ID: g.UUID, Health: pluginapi.Healthy})
	}
	return out
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices()}); err != nil {
		return err
	}
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
	case <-s.Context().Done():
	}
	return nil
}

// Allocate answers as the NVIDIA plugin does with its default envvar strategy: NVIDIA_VISIBLE_DEVICES lists
// the UUIDs; a bind mount of a host file stands for each /dev/nvidia<minor>.
func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	byUUID := map[string]fakegpu.GPU{}
	for _, g := range p.gpus {
		byUUID[g.UUID] = g
	}
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		cr := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(c.DevicesIds, ",")}}
		for _, id := range c.DevicesIds {
			g, ok := byUUID[id]
			if !ok {
				return nil, fmt.Errorf("unknown device %q", id)
			}
			cr.Mounts = append(cr.Mounts, &pluginapi.Mount{ContainerPath: fmt.Sprintf("/dev/nvidia%d", g.Minor), HostPath: g.DevFile, ReadOnly: true})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cr)
	}
	klog.InfoS("allocated", "request", req.String())
	return resp, nil
}

func (p *plugin) Start(ctx context.Context) error {
	_ = os.Remove(p.socket)
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	p.mu.Lock()
	p.server, p.done = srv, make(chan struct{})
	p.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
	if err := p.register(ctx); err != nil {
		p.Stop()
		return fmt.Errorf("registering with the kubelet at %s: %w", p.kubeletSocket, err)
	}
	klog.InfoS("registered", "resource", p.resource, "devices", len(p.gpus), "socket", p.socket)
	return nil
}

func (p *plugin) register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+p.kubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: filepath.Base(p.socket), ResourceName: p.resource,
	})
	return err
}

// Stop ends the streams, lets in-flight calls finish for up to the grace period, then removes the socket.
func (p *plugin) Stop() {
	p.mu.Lock()
	srv, done := p.server, p.done
	p.server = nil
	p.mu.Unlock()
	if srv == nil {
		return
	}
	close(done)
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(p.grace):
		srv.Stop()
	}
	_ = os.Remove(p.socket)
	klog.InfoS("stopped", "resource", p.resource)
}

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the node's client")
	node := flag.String("node", "", "Node name")
	count := flag.Int("devices", 2, "number of fake GPUs")
	resource := flag.String("resource", "nvidia.com/gpu", "extended resource name")
	pluginDir := flag.String("plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device-plugin directory")
	devDir := flag.String("dev-dir", "", "directory for the files standing for /dev/nvidiaN")
	label := flag.String("label", "nvidia.com/gpu.deploy.device-plugin", "run only while the Node has this label = true (empty: always)")
	interval := flag.Duration("poll", time.Second, "how often the Node's labels are read")
	grace := flag.Duration("grace", 30*time.Second, "graceful-stop limit (a DaemonSet pod's default termination grace)")
	flag.Parse()
	if *node == "" || *kubeconfig == "" || *devDir == "" {
		klog.Exit("--node, --kubeconfig and --dev-dir are required")
	}
	gpus, err := fakegpu.GPUs(*node, *count, *devDir)
	if err != nil {
		klog.Exit(err)
	}
	client, err := fakegpu.Client(*kubeconfig)
	if err != nil {
		klog.Exit(err)
	}
	p := &plugin{
		resource: *resource, gpus: gpus, grace: *grace,
		socket:        filepath.Join(*pluginDir, "dra-migrate-fake-gpu.sock"),
		kubeletSocket: filepath.Join(*pluginDir, "kubelet.sock"),
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	fakegpu.RunWhileLabelled(ctx, client, *node, *label, "true", *interval, p)
}
