// cri-clean stops and removes every pod sandbox of one containerd through the CRI, as the kubelet would
// when a pod goes: the runtime then tears down the sandbox's network (CNI DEL, releasing its IP) and
// unmounts its network namespace. tools/k8s/node down runs it after stopping the kubelet, so nothing a
// pod created outlives the node.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	endpoint := flag.String("endpoint", "", "containerd's socket path")
	flag.Parse()
	if err := run(*endpoint); err != nil {
		fmt.Fprintln(os.Stderr, "cri-clean:", err)
		os.Exit(1)
	}
}

func run(endpoint string) error {
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	pods, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var failed error
	for _, p := range pods.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			failed = fmt.Errorf("stop sandbox %s (%s/%s): %w", p.Id, p.Metadata.Namespace, p.Metadata.Name, err)
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			failed = fmt.Errorf("remove sandbox %s: %w", p.Id, err)
		}
	}
	fmt.Fprintf(os.Stderr, "cri-clean: removed %d pod sandbox(es)\n", len(pods.Items))
	return failed
}
