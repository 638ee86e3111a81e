// Package fakegpu is what the two fake GPU plugins of the real test node share: the fake devices
// (one identity per node and minor, so both plugins name the same GPUs) and a controller that runs a
// plugin only while its Node carries a label, as the GPU Operator runs its DaemonSets through node
// selectors (NVIDIA/gpu-operator assets/state-device-plugin/0500_daemonset.yaml nodeSelector).
package fakegpu

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// GPU is one fake device. Minor is the /dev/nvidia<minor> number the NVIDIA driver names devices by
// (kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/deviceinfo.go: "gpu-<minor>").
type GPU struct {
	Minor int
	UUID  string
	// DevFile is a regular file on the host that stands for /dev/nvidia<minor> inside containers.
	DevFile string
}

// GPUs returns n fake GPUs of node; their device files live under devDir (created here).
func GPUs(node string, n int, devDir string) ([]GPU, error) {
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		return nil, err
	}
	out := make([]GPU, 0, n)
	for i := 0; i < n; i++ {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", node, i)))
		// NVML UUIDs look like GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
		uuid := fmt.Sprintf("GPU-%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
		f := filepath.Join(devDir, fmt.Sprintf("nvidia%d", i))
		if err := os.WriteFile(f, []byte(uuid+"\n"), 0o644); err != nil {
			return nil, err
		}
		out = append(out, GPU{Minor: i, UUID: uuid, DevFile: f})
	}
	return out, nil
}

// Client builds a clientset from a kubeconfig file.
func Client(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "dra-migrate-realnode/" + filepath.Base(os.Args[0])
	return kubernetes.NewForConfig(cfg)
}

// Runnable is started when the label appears and stopped when it goes.
type Runnable interface {
	Start(ctx context.Context) error
	Stop()
}

// RunWhileLabelled polls the Node every interval and keeps r running exactly while the Node's label
// key equals value (always when key is empty). It returns when ctx ends, stopping r first.
func RunWhileLabelled(ctx context.Context, client kubernetes.Interface, node, key, value string, interval time.Duration, r Runnable) {
	running := false
	stop := func() {
		if running {
			klog.InfoS("stopping", "node", node, "label", key)
			r.Stop()
			running = false
		}
	}
	defer stop()
	for {
		want := key == ""
		if !want {
			n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			switch {
			case err != nil && ctx.Err() == nil:
				klog.ErrorS(err, "reading node", "node", node)
				want = running // keep the current state while the API server is unreachable
			case err == nil:
				want = n.Labels[key] == value
			}
		}
		if want && !running {
			klog.InfoS("starting", "node", node, "label", key)
			if err := r.Start(ctx); err != nil {
				klog.ErrorS(err, "start failed; retrying")
			} else {
				running = true
			}
		} else if !want {
			stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}
