// dra-config-check: the NVIDIA DRA driver's own verdict on opaque claim configs, for the tests of
// `dra-migrate convert --sharing` (tests/integration/test_driver_config.py).
//
// It reads a JSON array of `parameters` objects (what a claim's spec.devices.config[].opaque.parameters holds)
// on stdin and, for each, does what the kubelet plugin does when it prepares a claim
// (sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/device_state.go `prepareDevices`):
// decode with the API group's strict decoder (GetOpaqueDeviceConfigs), Normalize, Validate, and for MPS turn
// the pinned-memory limits into the daemon's per-device limits (cmd/gpu-kubelet-plugin/sharing.go), with the
// feature gates given as -feature-gates (the plugin's own flag syntax). It prints one JSON line per input:
// {"ok": true} or {"ok": false, "error": "..."}. Built by tools/nvidia/build (part config-check) inside the
// driver's wrapper module, so it links the very packages the plugin binary does.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	configapi "sigs.k8s.io/dra-driver-nvidia-gpu/api/nvidia.com/resource/v1beta1"
	"sigs.k8s.io/dra-driver-nvidia-gpu/pkg/featuregates"
)

type verdict struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

func check(raw json.RawMessage) error {
	obj, err := runtime.Decode(configapi.StrictDecoder, raw)
	if err != nil {
		return fmt.Errorf("error decoding config parameters: %w", err)
	}
	config, ok := obj.(configapi.Interface)
	if !ok {
		return fmt.Errorf("runtime object is not a recognized configuration")
	}
	if err := config.Normalize(); err != nil {
		return fmt.Errorf("error normalizing GPU config: %w", err)
	}
	if err := config.Validate(); err != nil {
		return fmt.Errorf("error validating GPU config: %w", err)
	}
	var sharing configapi.Sharing
	switch c := obj.(type) {
	case *configapi.GpuConfig:
		if c.Sharing != nil {
			sharing = c.Sharing
		}
	case *configapi.MigDeviceConfig:
		if c.Sharing != nil {
			sharing = c.Sharing
		}
	}
	if sharing != nil && sharing.IsMps() {
		mps, err := sharing.GetMpsConfig()
		if err != nil {
			return err
		}
		if mps != nil {
			if _, err := mps.DefaultPerDevicePinnedMemoryLimit.Normalize([]string{"GPU-00000000-0000-0000-0000-000000000000"}, mps.DefaultPinnedDeviceMemoryLimit); err != nil {
				return err
			}
		}
	}
	return nil
}

func main() {
	gates := flag.String("feature-gates", "", "comma-separated key=value pairs, as the kubelet plugin takes them")
	flag.Parse()
	if *gates != "" {
		if err := featuregates.FeatureGates().Set(*gates); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(2)
		}
	}
	var docs []json.RawMessage
	if err := json.NewDecoder(os.Stdin).Decode(&docs); err != nil {
		fmt.Fprintln(os.Stderr, "error: stdin is not a JSON array:", err)
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	for _, d := range docs {
		v := verdict{OK: true}
		if err := check(d); err != nil {
			v = verdict{Error: err.Error()}
		}
		_ = out.Encode(v)
	}
}
