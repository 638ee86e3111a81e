# ruff: noqa: E501  (a table of prose: one string per field reads better than split literals)
"""What each rule means, why it matters and how to fix it: what `dra-migrate explain RULE` and
`check --list-rules` print (docs/explain.md).

Seeded from the README's rule table (when a rule fires, the fact it rests on) and each rule's remediation;
a test keeps this table and the registry (checks/registry.py) naming the same rules. A rule added in a
module of its own may register its doc here with `document(...)` beside its `@rule`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RuleDoc:
    when: str  # when it fires (what it means)
    rests_on: str  # the primary source: why it matters
    fix: str  # how to fix (the finding's own fix line says it for the objects at hand)


RULE_DOCS: dict[str, RuleDoc] = {
    "k8s-version-unsupported": RuleDoc(
        when="server older than 1.34.2, version unknown, or `resource.k8s.io/v1` not served",
        rests_on="`resource.k8s.io/v1` introduced in 1.34 (k8s.io/api `resource/v1/types.go`); NVIDIA DRA driver and GPU Operator require 1.34.2 (dra-driver-nvidia-gpu `prerequisites.md`, gpu-operator `dra-intro-install.rst`)",
        fix="state it with --kubernetes-version vX.Y.Z, or take the snapshot with dra-migrate snapshot",
    ),
    "extended-resource-unavailable": RuleDoc(
        when="`DRAExtendedResource` off: 1.34–1.35 unless declared on with `--feature-gate`; 1.36 when declared off; never on 1.37 (GA, locked)",
        rests_on="KEP-5004 `kep.yaml` (alpha 1.34, beta 1.36, stable 1.37), kubernetes `pkg/features`",
        fix="enable …=true on kube-apiserver, kube-scheduler, kube-controller-manager and kubelet (then pass --feature-gate …=true), or upgrade to 1.36+",
    ),
    "driver-version-too-old": RuleDoc(
        when="NVIDIA driver < 580 in ClusterPolicy `spec.driver.version`, an NVIDIADriver, or a node's `nvidia.com/cuda.driver-version.full`",
        rests_on="GPU Operator DRA requirements (580+); the standalone driver documents 565+, we hold the stricter floor",
        fix="upgrade the NVIDIA driver to … or later on the listed objects' nodes before migrating",
    ),
    "cdi-disabled": RuleDoc(
        when="ClusterPolicy `spec.cdi.enabled: false`",
        rests_on="the DRA driver injects devices through CDI (dra-driver-nvidia-gpu `prerequisites.md`)",
        fix="set spec.cdi.enabled: true in the ClusterPolicy (the chart's default)",
    ),
    "container-runtime-cdi": RuleDoc(
        when="a GPU node switched in place runs a container runtime (`status.nodeInfo.containerRuntimeVersion`) that cannot inject CDI devices named in the CRI: containerd before 1.7.2, CRI-O before 1.28, Docker before 25 (a blocker, node-scoped: the plan leaves the nodes out); or that can only if configured so, which the API does not show: containerd 1.7.2+ (`enable_cdi = true`, default false; settled when the first ClusterPolicy says `spec.cdi.enabled: true` and its toolkit runs on the node), Docker 25+ (`features.cdi` and a cri-dockerd that passes CDI devices) (a warning). Nothing on containerd 2.x or CRI-O 1.28+ (on by default); other runtimes and versions without major.minor.patch are not judged. One finding per pool and kind",
        rests_on="the DRA driver hands devices over only as CDI ids (dra-driver-nvidia-gpu v0.4.1 `cmd/gpu-kubelet-plugin/cdi.go`, `docs/prerequisites.md`), which the kubelet passes only in the CRI `CDIDevices` field since 1.31 (kubernetes v1.37.2 `pkg/kubelet/cm/dra/manager.go`); containerd v1.6.38 `pkg/cri` (no CDI), v1.7.0 vs v1.7.2 `pkg/cri/server/container_create_linux.go` (annotations only, then the field), v1.7.27 `pkg/cri/config/config_unix.go` (`EnableCDI: false`), v2.0.0 `internal/cri/config/config_unix.go` (`EnableCDI: true`); cri-o v1.27.8 vs v1.28.0 `internal/factory/container/device.go`; moby/moby#45134 (Docker 25), Mirantis/cri-dockerd#522; nvidia-container-toolkit v1.19.1 `cmd/nvidia-ctk-installer/container/runtime/runtime.go` (the operator's toolkit writes `enable_cdi = true` when CDI is on)",
        fix='upgrade the runtime (containerd 2.x, CRI-O 1.28+), or verify the named config key on the nodes (containerd 1.7: `enable_cdi = true` under `[plugins."io.containerd.grpc.v1.cri"]`), then plan again',
    ),
    "dra-driver-missing": RuleDoc(
        when="no DaemonSet of the NVIDIA DRA kubelet plugin and no `gpu.nvidia.com` ResourceSlices",
        rests_on="the scheduler serves DRA requests only from published slices (KEP-4381)",
        fix="install the dra-driver-nvidia-gpu chart (gpuResourcesEnabledOverride=true beside the device plugin); its default placement runs the plugin on every GPU node, or pass kubeletPlugin.nodeSelector nvidia.com/dra-kubelet-plugin=true to switch it per node with a label",
    ),
    "dual-advertising": RuleDoc(
        when="a node's device plugin advertises a GPU resource (allocatable > 0) while the DRA driver publishes slices for it (what the DRA chart's default placement does on every GPU node before migration: a warning; a blocker once a ResourceClaim holds one of its devices), or a migrated node (the DRA plugin switched on by a label such as `nvidia.com/dra-kubelet-plugin=true`, slices published) has its device plugin back: advertising again, or selected again by its DaemonSet so that its pod is coming (a blocker naming the nodes)",
        rests_on="KEP-5004: one node cannot have the same extended resource backed by DRA and by a device plugin at once (kubernetes/enhancements `keps/sig-scheduling/5004-dra-extended-resource/README.md`, Proposal); the scheduler serves `nvidia.com/gpu` from the device plugin where allocatable > 0 (kubernetes v1.37.2 `pkg/scheduler/framework/plugins/noderesources/fit.go`) while the slices stay allocatable to explicit claims (`dynamicresources` plugin), and the DRA plugin publishes every GPU it finds (dra-driver-nvidia-gpu v0.4.1 `cmd/gpu-kubelet-plugin/driver.go` `PublishResources`); chart default: its `deployments/helm/dra-driver-nvidia-gpu/values.yaml` `kubeletPlugin.affinity`. Under a ClusterPolicy the GPU Operator deletes every `nvidia.com/gpu.deploy.*` label of a node whose NFD GPU labels are gone and sets each missing one to `true` (gpu-operator `controllers/state_manager.go` `labelGPUNodes`, `removeAllGPUStateLabels`, `addGPUStateLabels`): an NFD label flap, a recreated node or `nvidia.com/gpu.deploy.operands` toggled brings the device plugin back; a re-run of the device plugin's chart restores its DaemonSet's affinity",
        fix="after a migration: label the nodes nvidia.com/gpu.deploy.device-plugin=false again (or the label the device plugin's DaemonSet stops on), put that label in the node group's template, and once every GPU pool is migrated set ClusterPolicy spec.devicePlugin.enabled=false, which no node label brings back. Before one: move the claims' pods off these nodes or migrate the nodes now (device plugin off first); until then create no ResourceClaims for GPUs on nodes still on the device plugin",
    ),
    "kubelet-version-unsupported": RuleDoc(
        when="a GPU node's `status.nodeInfo.kubeletVersion` is before 1.36 (unless `--feature-gate DRAExtendedResource=true` declares it on), 1.36 with the gate declared off, or before 1.34; an unknown version is not judged. Such nodes add nothing to capacity `after` (`afterSource: excluded`)",
        rests_on="KEP-5004 lists the kubelet among the gate's components (kubernetes/enhancements `keps/sig-scheduling/5004-dra-extended-resource/kep.yaml`); only a kubelet with the gate on drops DRA-backed requests from admission, otherwise the pod fails against the device plugin's leftover allocatable 0 (kubernetes v1.37.2 `pkg/kubelet/lifecycle/predicate.go`); gate stages in `pkg/features/kube_features.go`",
        fix="upgrade these nodes' kubelets to 1.36+ (or enable DRAExtendedResource=true on them and pass --feature-gate DRAExtendedResource=true), then plan again",
    ),
    "dra-plugin-placement-unknown": RuleDoc(
        when="no node label an operator can set makes an installed DRA kubelet-plugin DaemonSet run on a GPU node (its affinity uses only labels NFD/GFD/the kubelet own, `Gt`/`Lt`, `matchFields`, or a taint it does not tolerate)",
        rests_on="the DaemonSet controller's own test: nodeSelector, required node affinity (ORed terms), taints (kubernetes `pkg/controller/daemon/daemon_controller.go`); DaemonSet names: dra-driver-nvidia-gpu v0.4 chart `dra-driver-nvidia-gpu-kubelet-plugin`, v25.x `nvidia-dra-driver-gpu-kubelet-plugin`, GPU Operator GPUCluster `nvidia-dra-driver-kubelet-plugin` selecting `nvidia.com/gpu.deploy.dra-driver=true` (gpu-operator `manifests/state-dra-driver/0500_daemonset.yaml`)",
        fix='upgrade the DRA chart with kubeletPlugin.nodeSelector {nvidia.com/dra-kubelet-plugin: "true"} (or the chart\'s default affinity, which selects nvidia.com/gpu.present=true), or remove the taint it does not tolerate, then plan again',
    ),
    "device-plugin-placement-unknown": RuleDoc(
        when="no one settable node label stops every device-plugin DaemonSet running on a GPU node (a standalone manifest without selector or affinity runs on every node; the k8s-device-plugin Helm chart v0.18.0 by default ORs three affinity terms on NFD's and the GPU Operator's own labels: `feature.node.kubernetes.io/pci-10de.present`, `feature.node.kubernetes.io/cpu-model.vendor_id`, `nvidia.com/gpu.present`)",
        rests_on="same DaemonSet test; the operator's DaemonSet selects `nvidia.com/gpu.deploy.device-plugin=true` and the operator keeps a value once set (gpu-operator `assets/state-device-plugin/0500_daemonset.yaml`, `controllers/state_manager.go`)",
        fix="add {key: nvidia.com/gpu.deploy.device-plugin, operator: NotIn, values: [\"false\"]} to every nodeSelectorTerm of the device-plugin DaemonSet's required node affinity (terms are ORed: a term without it keeps the plugin running; for the k8s-device-plugin Helm chart, its `affinity` value: deployments/helm/nvidia-device-plugin/values.yaml), or give a DaemonSet without affinity that expression; nodes without the label keep the plugin, and the GPU Operator's DaemonSet selects that label already. Then plan again",
    ),
    "dynamic-mig-unpredicted": RuleDoc(
        when="the DRA plugin serving a node runs with `DynamicMIG=true` (container args or env) or its slices carry shared counters, and the node has no slices yet",
        rests_on="under DynamicMIG the driver publishes the full GPU and every possible MIG placement with counters (dra-driver-nvidia-gpu `cmd/gpu-kubelet-plugin/driver.go`, `partitions.go`): GFD labels do not give the exact count `wait-dra-ready` waits for",
        fix="let the DRA plugin publish on these nodes first (its slices then give the count), or turn DynamicMIG off, then plan again",
    ),
    "mig-layout-unpredicted": RuleDoc(
        when="a node still to migrate, without slices of the DRA driver, whose GFD product label ends in `-MIG-<suffix>` that is no MIG profile (GFD's `-MIG-INVALID` under the single strategy, with `gpu.count` 0); or whose GFD runs the none MIG strategy (no `nvidia.com/mig.strategy` single/mixed label, no MIG counts) while the MIG Manager's `nvidia.com/mig.config` names a config that turns MIG on, is not in state `success`, or is not known (neither `all-disabled` nor a config of the mig-parted ConfigMap read whose entries all say `mig-enabled: false`)",
        rests_on="GFD labels `<model>-MIG-INVALID` with count 0 when the GPUs are MIG-enabled without instances, MIG-enabled beside MIG-disabled, or hold several profiles (k8s-device-plugin v0.18.0 `internal/lm/mig-strategy.go` `newInvalidMigStrategyLabeler`); under the none strategy it labels MIG-enabled GPUs whole and writes no MIG label (`NewResourceLabeler`, `newGPULabelers`; `internal/lm/strategy.go`), and the device plugin advertises them as `nvidia.com/gpu` (`internal/rm/device_map.go` `buildGPUDeviceMap`); the DRA driver publishes each MIG-disabled GPU whole and every MIG device of the others (dra-driver-nvidia-gpu v0.4.1 `cmd/gpu-kubelet-plugin/nvlib.go` `GetPerGpuAllocatableDevices`): the exact count `wait-dra-ready` waits for is in no label",
        fix="single strategy: give every GPU of the node MIG instances of one profile (or turn MIG off on all), or use the mixed strategy; none strategy: apply `nvidia.com/mig.config=all-disabled` where the GPUs are meant whole, or run the device plugin and GFD with the mixed (or single) strategy where MIG is meant; or let the DRA plugin publish on these nodes first (its slices then give the count); then plan again",
    ),
    "gpu-devices-unmatched": RuleDoc(
        when="a node switched in place serves GPU resources (capacity above 0) that DeviceClasses map, and none of those classes matches any device of the node (its slices of the DRA driver, else the prediction): e.g. MIG-enabled GPUs served whole as `nvidia.com/gpu` under the device plugin's none MIG strategy, whose DRA plugin already published their MIG devices",
        rests_on="the scheduler backs an extended resource only with devices of its DeviceClass (KEP-5004 DRAExtendedResource), so the plan's canary and the node's pods are never scheduled there once the device plugin is off; under none the device plugin serves a MIG-enabled GPU whole (k8s-device-plugin v0.18.0 `internal/rm/device_map.go` `buildGPUDeviceMap`) while the DRA driver publishes it as `type: mig` devices only, which the `nvidia.com/gpu` class (`type == 'gpu'`) does not select (dra-driver-nvidia-gpu v0.4.1 `cmd/gpu-kubelet-plugin/nvlib.go` `GetPerGpuAllocatableDevices`)",
        fix="turn MIG off on these GPUs (`nvidia.com/mig.config=all-disabled`) or serve their MIG devices under the mixed MIG strategy, or give the resource a DeviceClass that selects the node's devices; then plan again",
    ),
    "operator-validator-device-plugin": RuleDoc(
        when="a ClusterPolicy keeps `devicePlugin.enabled` (so the validator keeps its plugin validation) and GPU nodes are still to migrate",
        rests_on="the validator's `plugin-validation` needs node capacity `nvidia.com/gpu*`/`nvidia.com/mig-*` ≥ 1, 30 tries 5 s apart, in every release through v26.7.0 (gpu-operator `cmd/nvidia-validator/main.go` `validateGPUResource`, kept while devicePlugin is enabled: `controllers/object_controls.go`); capacity drops to 0 five minutes after the device plugin leaves (kubernetes `pkg/kubelet/cm/devicemanager/endpoint.go` `endpointStopGracePeriod`), so the validator crash-loops whenever it restarts on a migrated node: a reboot, a driver upgrade or reload (the driver manager pauses it), a MIG change (the MIG Manager deletes it: mig-parted `pkg/mig/reconfigure/reconfigure.go` `restartValidatorPod`). A driver upgrade then waits 600 s in `validation-required` and ends `upgrade-failed` before the node is uncordoned (k8s-operator-libs `pkg/upgrade/validation_manager.go`, `common_manager.go`). Labelling the node `nvidia.com/gpu.deploy.operator-validator=false` is worse: with no validator pod the upgrade waits for ever (no timeout without a pod), and after a reboot nothing writes `/run/nvidia/validations/toolkit-ready`, which GFD, dcgm-exporter and the MIG Manager wait for (gpu-operator `assets/*/0500_daemonset.yaml` init containers)",
        fix="after the last pool is migrated set ClusterPolicy spec.devicePlugin.enabled=false (the operator then drops plugin-validation); until then expect the validator to fail on migrated nodes after a restart, and driver upgrades there to take 10 minutes longer and end upgrade-failed before the uncordon. Do not label nodes nvidia.com/gpu.deploy.operator-validator=false",
    ),
    "gpu-operator-node-busy": RuleDoc(
        when="a node still to migrate has `nvidia.com/gpu-driver-upgrade-state` other than unset or `upgrade-done`, `nvidia.com/mig.config.state` `pending`/`rebooting`, or a label valued `paused-for-driver-upgrade`/`paused-for-mig-change` (node-scoped: the plan leaves the node out; `apply` refuses it at the cordon and at the device-plugin switch)",
        rests_on='the driver manager and the MIG Manager read the deploy labels when they begin and write them back at the end, so a `nvidia.com/gpu.deploy.device-plugin=false` set in between becomes `true` again and the device plugin returns beside the DRA plugin (NVIDIA/k8s-driver-manager `cmd/driver-manager/main.go` `fetchCurrentLabels`, `rescheduleGPUOperatorComponents`; NVIDIA/mig-parted `pkg/mig/reconfigure/reconfigure.go` `getCurrentNodeLabels`, `restartKubernetesGPUClients`); the driver upgrade controller uncordons the node at `uncordon-required` (k8s-operator-libs `pkg/upgrade/common_manager.go`); a paused label reads as "device plugin off" to the DaemonSet',
        fix="let the upgrade or MIG change finish (or keep the node out of driver upgrades with nvidia.com/gpu-driver-upgrade.skip=true), then plan again",
    ),
    "driver-manager-eviction-label": RuleDoc(
        when="an operator-managed driver (ClusterPolicy `driver.enabled` not false) whose `driver.manager.env` `NODE_LABEL_FOR_GPU_POD_EVICTION` is not a label the DRA kubelet-plugin DaemonSet selects on (or the DaemonSet selects on no settable label at all: the chart default)",
        rests_on="\"the NVIDIA Driver Manager is not aware of the DRA driver kubelet plugin\": the GPU Operator's DRA recipe sets that variable to the plugin's label (NVIDIA cloud-native-docs `gpu-operator/dra-intro-install.rst` @ 66160ebc)",
        fix="set the driver manager's NODE_LABEL_FOR_GPU_POD_EVICTION to a label the migration sets, or run the migration with the driver manager's eviction off",
    ),
    "existing-class-matches-no-gpu": RuleDoc(
        when="a DeviceClass already in the cluster declares the `extendedResourceName` of a GPU name a pool serves today and matches none of the devices the `--dra-driver` publishes (or would publish) on the pool's nodes: another driver's class (`gpu.amd.com`, `dra.net`, `compute-domain.nvidia.com`) or a selector that excludes the GPUs",
        rests_on="kube-scheduler serves an extended resource from the DeviceClass that declares it, whatever devices it selects (KEP-5004, kubernetes/enhancements `keps/sig-scheduling/5004-dra-extended-resource/README.md`; k8s.io/api resource/v1 `DeviceClassSpec.ExtendedResourceName`); dra-migrate generates no class for a name one already maps",
        fix="make the class select the driver's devices (`device.driver == 'gpu.nvidia.com'`), or clear its extendedResourceName so that dra-migrate generates one, then plan again",
    ),
    "dra-driver-release-attribute": RuleDoc(
        when="a DeviceClass, ResourceClaim or ResourceClaimTemplate names, in a CEL selector or a `matchAttribute` constraint, a GPU attribute the NVIDIA DRA driver release its kubelet-plugin DaemonSet runs (read from the image tag, else the chart's labels on the DaemonSet) does not publish: `index`, `minor`, `parentIndex` (NVIDIA's v25.3.x only), `pcieBusID` (before v25.12.0), `resource.kubernetes.io/pciBusID` (v25.12.0 on, dra-driver-nvidia-gpu v0.4); also when an upgrade leaves DaemonSets of two releases",
        rests_on="each release's `cmd/gpu-kubelet-plugin/deviceinfo.go` (NVIDIA/k8s-dra-driver-gpu v25.3.2, v25.8.1; v25.12.0 with `partitions.go`; dra-driver-nvidia-gpu v0.4.1): a selector on an attribute a device lacks fails for it and a `matchAttribute` a device lacks excludes it (KEP-4381), so the claim stays Pending (docs/nvidia-tier.md, Driver releases)",
        fix="select on attributes every release publishes (`type`, `productName`, `profile`, `uuid`, `resource.kubernetes.io/pcieRoot`), or run a release that publishes the attribute, then check again",
    ),
    "dra-driver-release-unknown": RuleDoc(
        when="a DRA kubelet-plugin DaemonSet runs NVIDIA's image (`k8s-dra-driver-gpu`) pinned by digest only or by a tag that is no version (`latest`), and carries no chart labels naming a release (`app.kubernetes.io/version`, `helm.sh/chart`): devices are predicted, classes matched and sharing advised as v25.12.0 and dra-driver-nvidia-gpu v0.4.1 publish them",
        rests_on="NVIDIA/k8s-dra-driver-gpu v25.3.2 and v25.8.1 publish `pcieBusID` (v25.3.x also `index`, `minor`, `parentIndex`) and name MIG devices `gpu-<minor>-mig-<giProfileId>-<start>-<size>`, v25.12.0 `resource.kubernetes.io/pciBusID` and `gpu-<minor>-mig-<profile>-<giProfileId>-<start>` (`cmd/gpu-kubelet-plugin/deviceinfo.go`, v25.12.0 `mig.go`); the chart labels the DaemonSet `app.kubernetes.io/version: <appVersion>` and `helm.sh/chart: <name>-<version>` (`deployments/helm/nvidia-dra-driver-gpu/templates/_helpers.tpl`) (docs/nvidia-tier.md, Driver releases)",
        fix="pin the kubelet plugin's image to its version tag (the chart's `image.tag`, e.g. `v25.8.1`, or `v25.8.1@sha256:…` to keep the digest), or keep the chart's labels on the DaemonSet, then check again",
    ),
    "duplicate-extended-resource-name": RuleDoc(
        when="two or more DeviceClasses name the same `extendedResourceName`",
        rests_on='"the class created later is picked" (k8s.io/api `resource/v1/types.go`)',
        fix="keep one class with extendedResourceName … and clear the field on the others",
    ),
    "shared-gpu-capacity-loss": RuleDoc(
        when="time-slicing or MPS replicas > 1 on the pool's nodes: `nvidia.com/gpu.replicas` for full GPUs, `nvidia.com/mig-<profile>.replicas` for a time-sliced MIG profile",
        rests_on="DRA has no replicas: one request takes whole devices, pods share a device only through one ResourceClaim; the claim's GpuConfig/MigDeviceConfig sharing TimeSlicing needs the driver's TimeSlicingSettings gate, MPS its MPSSupport gate (both off by default in dra-driver-nvidia-gpu v0.4.1 pkg/featuregates), and MPS limits are only those its mpsConfig gives (the device plugin's gave each replica 100/N % of threads and 1/N of memory: k8s-device-plugin v0.18.0 cmd/mps-control-daemon/mps/daemon.go)",
        fix="keep this pool on the device plugin, add GPUs, or move its consumers to shared ResourceClaims before migrating; the finding spells out the opaque config (for MPS, defaultActiveThreadPercentage and defaultPinnedDeviceMemoryLimit per replica) and the feature gate it needs",
    ),
    "unmapped-gpu-resource": RuleDoc(
        when="a GPU name in use that no DeviceClass will map (`nvidia.com/gpu.shared`, `rename`s, unknown names)",
        rests_on="see `generate deviceclasses`",
        fix="convert these workloads to ResourceClaims (dra-migrate convert) or keep their pool on the device plugin",
    ),
    "mig-strategy-class-overlap": RuleDoc(
        when="nodes under the MIG single strategy advertise profile P as nvidia.com/gpu while nodes under the mixed "
        "strategy have P instances too: the nvidia.com/gpu class would give whole-GPU pods those slices",
        rests_on="k8s-device-plugin v0.18.0 MIG strategies (internal/rm, internal/lm/resource.go); a DeviceClass "
        "selects devices, not nodes (k8s.io/api resource/v1 `DeviceClassSpec`)",
        fix="move the single-strategy nodes to the mixed strategy before migrating, or convert the whole-GPU "
        "workloads to claims of gpu.nvidia.com",
    ),
    "other-nvidia-resource": RuleDoc(
        when="nodes advertise an nvidia.com/* resource that is not the GPU device plugin's (the Network Operator's "
        "SR-IOV and RDMA devices, GPUs passed to VMs): left alone, neither converted nor waited for",
        rests_on="k8s-device-plugin v0.18.0 `api/config/v1/config.go` `DisableResourceNamingInConfig` (no custom "
        "names); Mellanox/network-operator `deployment/network-operator/values.yaml` (`resourcePrefix: nvidia.com`)",
        fix="nothing, unless it is a GPU resource of a device plugin this tool does not know",
    ),
    "clusterpolicy-gpucluster-conflict": RuleDoc(
        when="both a ClusterPolicy and a GPUCluster exist",
        rests_on='"only one may be present at a time" (gpu-operator `controllers/nodelabeling_controller.go`)',
        fix="delete one; for a staged migration keep the ClusterPolicy and install the standalone DRA driver",
    ),
    "operator-no-in-place-migration": RuleDoc(
        when="a ClusterPolicy manages the cluster",
        rests_on='"an in-place migration … from ClusterPolicy to GPUCluster is not supported" (gpu-operator `dra-intro-install.rst`)',
        fix="migrate node pool by node pool with the standalone DRA driver beside the ClusterPolicy (what dra-migrate plan produces)",
    ),
    "pdb-blocks-drain": RuleDoc(
        when="a PodDisruptionBudget allowing no disruption (`status.disruptionsAllowed: 0`, or `maxUnavailable: 0`) selects bound GPU pods; a budget with no selector selects none, `selector: {}` selects every pod of its namespace — the one rule `check` and the drain share (`dra_migrate.inventory.placement.pdb_selects`)",
        rests_on="eviction honours budgets (policy/v1 Eviction API); null vs empty selector: k8s.io/api `policy/v1` `PodDisruptionBudgetSpec.selector`, converted by `metav1.LabelSelectorAsSelector` (nil → nothing, `{}` → everything; apimachinery `pkg/apis/meta/v1/helpers.go`) as the disruption controller does",
        fix="scale the workload up, relax the budget for the migration window, or schedule the pool last",
    ),
    "fractional-gpu-request": RuleDoc(
        when="a workload (or bare pod) asks for part of a GPU: HAMi's `nvidia.com/gpucores` / `nvidia.com/gpumem` / `gpumem-percentage` beside `nvidia.com/gpu`, Alibaba's `aliyun.com/gpu-mem`, Tencent's `tencent.com/vcuda-*`",
        rests_on='DRA allocates whole devices: one extended-resource unit is one device (KEP-5004); HAMi\'s names: Project-HAMi/HAMi README "Resource"; `convert` refuses these pods',
        fix="keep their pool on the fractional-GPU scheduler (leave it out of the plan), or move them to whole GPUs, MIG devices, or explicit claims with the DRA driver's sharing config; dra-migrate convert refuses them",
    ),
    "gpu-daemonset": RuleDoc(
        when="a DaemonSet's pod template requests a GPU by its device-plugin name and the DaemonSet runs in pools still to migrate",
        rests_on="the drain skips DaemonSet pods as kubectl drain does (kubernetes/kubectl `pkg/drain/filters.go` `daemonSetFilter`), so such a pod keeps its device-plugin GPU through the switch while the DRA driver publishes every GPU of the node; the DaemonSet controller removes a pod from a node its selector or required affinity no longer matches (kubernetes v1.37.2 `pkg/controller/daemon/daemon_controller.go` `podsShouldBeOnNode`)",
        fix="make the DaemonSet require the device plugin's label (node affinity `{key: nvidia.com/gpu.deploy.device-plugin, operator: NotIn, values: [\"false\"]}`, or the plan's `--device-plugin-label`), so that its pod leaves each node as the plan switches the device plugin off; run a DRA version of it (a ResourceClaimTemplate) for migrated nodes",
    ),
    "unmanaged-gpu-pod": RuleDoc(
        when="a running or pending pod that uses GPUs, on a GPU node still to migrate, has no owner reference marked `controller` (a debug shell, a notebook, a one-off run); finished pods and mirror pods are not counted",
        rests_on="kubectl drain refuses such pods without `--force`, nothing recreating them (kubernetes/kubectl `pkg/drain/filters.go` `unreplicatedFilter`); the cluster autoscaler will not remove their node either (cluster-autoscaler FAQ)",
        fix="have their owners finish or save them before their pool's wave (plan --order migrates the pool later, --exclude-pools leaves it out), or run such work under a Job; accept the loss in .dra-migrate-ignore.yaml to record that it was seen",
    ),
    "pods-marked-do-not-disrupt": RuleDoc(
        when='a GPU pod the drain will evict from a node still to migrate carries `karpenter.sh/do-not-disrupt: "true"` or `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` (or `"on-completion"`); one warning per pool, naming the first few. Finished pods, pods being deleted, DaemonSet and mirror pods (which the drain skips) are not counted; pods that use no GPUs are not kept in a snapshot and not read. The finding names every such pod (its objects): the drain of apply evicts those, each said on stderr and in the journal, and stops, evicting nothing on the node, at a marked pod it did not name (marked or started since the plan)',
        rests_on='Karpenter does not disrupt a node running an active pod with the annotation at exactly `"true"` (kubernetes-sigs/karpenter v1.6.2 `pkg/apis/v1/labels.go` `DoNotDisruptAnnotationKey`, `pkg/utils/pod/scheduling.go` `IsDisruptable`, `HasDoNotDisrupt`); the cluster autoscaler does not scale down a node running a pod with safe-to-evict `"false"` and waits for one with `"on-completion"` (kubernetes/autoscaler cluster-autoscaler-1.36.1 `utils/drain/drain.go`, `simulator/drainability/rules/notsafetoevict`, `oncompletion`; cluster-autoscaler FAQ); an eviction, like kubectl drain, reads neither (kubernetes/kubectl `pkg/drain/filters.go`)',
        fix="schedule the pool's waves for when these pods may be interrupted, or leave the pool out of the plan (--exclude-pools) or migrate it later (plan --order); remove the annotation where the work allows; accept it in .dra-migrate-ignore.yaml to record that it was seen",
    ),
    "job-fails-on-eviction": RuleDoc(
        when="a running job has GPU pods on nodes still to migrate and evicting them would fail or end it. A batch/v1 Job: no podFailurePolicy rule ignores the eviction (the first rule matching the `DisruptionTarget` condition or the exit codes 143/137), and its failures plus the pods to evict exceed `backoffLimit` (default 6; `backoffLimitPerIndex` 0 fails each evicted index), or a rule fails it outright; a JobSet's child only when the JobSet has no restart left. A Volcano Job: the first policy matching `PodFailed` (exit code 143/137) or `PodEvicted`, the pod's task's before the job's, is AbortJob, TerminateJob or CompleteJob, or RestartJob with no retry left (`maxRetry`, default 3). A Kubeflow v1 job (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob): the evicted pod's replica has restartPolicy Never (the kind's default where unset: TFJob, XGBoostJob, JAXJob), or `runPolicy.backoffLimit` is 0. A SparkApplication (Kubeflow Spark operator): its driver pod is evicted and its `restartPolicy` is Never (the default), OnFailure without `onFailureRetries`, or OnFailure with its retries used; Spark replaces lost executors. An Argo Workflow: a template that asks for GPUs has no retryStrategy (its own, else `templateDefaults`', else the workflow's) retrying a deleted pod (`retryPolicy` Always or OnError; unset is OnFailure), or `limit` 0",
        rests_on="the eviction API sets `DisruptionTarget` (kubernetes v1.37.2 `pkg/registry/core/pod/storage/eviction.go`) and the kubelet gives a deleted pod whose container stopped non-zero the phase Failed (`pkg/kubelet/kubelet_pods.go` `getPhase`); the Job controller counts evicted pods as failures and fails the Job once they exceed `backoffLimit`, unless an Ignore rule matches first (`pkg/controller/job/job_controller.go`, `pod_failure_policy.go`); a JobSet restarts a failed child only while restarts < `failurePolicy.maxRestarts` (sigs.k8s.io/jobset `FailurePolicy`); Volcano v1.10.0 `pkg/controllers/job` (`job_controller_handler.go` `updatePod`/`deletePod`, `job_controller_util.go` `applyPolicies`, `state/running.go`, `state/restarting.go`); Kubeflow training-operator v1.9.0 `pkg/controller.v1` (each framework's `UpdateJobStatus`; `common/job.go` backoffLimit; `pkg/util/train` retryable exit codes); Spark operator v2.3.0 `internal/controller/sparkapplication/controller.go` (a driver pod gone or Failed fails the run) and `pkg/util/sparkapplication.go` `ShouldRetry`; argo-workflows v3.6.4 `workflow/controller/operator.go` (a deleted pod's step is an Error \"pod deleted\"; `processNodeRetries`) and `workflow_types.go` `RetryPolicyActual`",
        fix="let them finish before their pool's wave (plan --order migrates it later, --exclude-pools leaves it out), or accept the failure in .dra-migrate-ignore.yaml; give jobs made from now on a podFailurePolicy rule `{action: Ignore, onPodConditions: [{type: DisruptionTarget}]}` (batch/v1), Volcano policies that restart the task or pod on `PodEvicted` and `PodFailed`, Kubeflow replicas restartPolicy OnFailure or ExitCode, SparkApplications restartPolicy OnFailure with `onFailureRetries`, Argo GPU templates a retryStrategy with retryPolicy Always or OnError",
    ),
    "topology-preferred-allocation": RuleDoc(
        when="a container asks for 2 or more whole GPUs (`nvidia.com/gpu` or a renamed full-GPU name; not MIG, not time-sliced) and the nodes it can land on have more than that; also says when live slices show no PCIe root holding that many GPUs, or GPUs without `resource.kubernetes.io/pcieRoot`",
        rests_on="the NVIDIA device plugin's GetPreferredAllocation picks a connected set for full GPUs (k8s-device-plugin v0.18.0 `internal/rm/nvml_manager.go` `alignedAlloc`); DRA takes any N matching devices unless a `matchAttribute` constraint ties them (KEP-4381, k8s.io/api resource/v1 `DeviceConstraint`: a device without the attribute is never chosen); dra-driver-nvidia-gpu v0.4.1 publishes `pcieRoot` only where sysfs resolves the GPU (`cmd/gpu-kubelet-plugin/nvlib.go` `getGpuInfo`)",
        fix="convert their manifests with `dra-migrate convert --topology` where one PCIe root holds that many GPUs; otherwise accept any placement, or keep these pools on the device plugin",
    ),
    "gang-workload-split": RuleDoc(
        when="a multi-pod training workload (Kubeflow jobs, JobSet, LeaderWorkerSet, Ray, Volcano Job) runs in more than one pool",
        rests_on="each pool migrates in its own stage",
        fix="pin it to one pool, or migrate its pools back to back when it is not running (plan --order …); within a pool the planner keeps a gang's nodes in one wave where the wave is wide enough",
    ),
    "unhealthy-gpus": RuleDoc(
        when="a node the plan switches in place still runs the device plugin and its `status.allocatable` of an `nvidia.com/` resource is below `status.capacity`: GPUs the device plugin marked Unhealthy (an XID, a lost GPU), or, at allocatable 0, a device plugin that stopped within the kubelet's grace period (one warning per node). Capacity after migration leaves those GPUs out; `wait-dra-ready` still expects every GPU, as the driver publishes them all",
        rests_on="the device plugin marks a GPU Unhealthy and never recovers it (k8s-device-plugin v0.18.0 `internal/rm/health.go` `checkHealth`, `internal/plugin/server.go` `ListAndWatch`); the kubelet keeps it in capacity, not allocatable (kubernetes v1.37.2 `pkg/kubelet/cm/devicemanager/manager.go` `GetCapacity`); GFD's `nvidia.com/gpu.count` counts it. The DRA driver publishes every GPU NVML enumerates and fails its enumeration on one NVML cannot query (dra-driver-nvidia-gpu v0.4.1 `cmd/gpu-kubelet-plugin/nvlib.go` `GetPerGpuAllocatableDevices`, go-nvlib v0.11.0 `VisitDevices`); it taints a GPU only on an NVML event after it starts, under its alpha `NVMLDeviceHealthCheck` gate, default off (`pkg/featuregates/featuregates.go`, `driver.go` `deviceHealthEvents`, `device_health.go` `registerEventsForDevices`, `healthEventToTaint`): a GPU broken before is published untainted",
        fix="repair or reset the GPUs before the node's wave (the DRA driver's NVMLDeviceHealthCheck gate taints only GPUs that fail after it starts); a GPU fallen off the bus needs the node repaired first (else the driver publishes nothing there and the wave rolls the node back); at allocatable 0 find out whether the device plugin or the GPUs failed",
    ),
    "gang-capacity-after": RuleDoc(
        when='per-node packing of the gang\'s `minCount` pods at each point (see "Gangs" below)',
        rests_on="the gang plugin holds a PodGroup's pods until `minCount` can be placed (kubernetes v1.37.2 `pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go`); Volcano and Kueue's all-or-nothing admission do the same for their jobs",
        fix="migrate its pools when it is not running, add nodes of its shape first, or migrate the pool in waves that leave room for it (plan --max-unavailable)",
    ),
    "gang-scheduling-unavailable": RuleDoc(
        when="Workloads, PodGroups or pods with `spec.schedulingGroup` exist, but `scheduling.k8s.io/v1beta1` is not served, or `GenericWorkload` is off (declared, or not declared on a snapshot)",
        rests_on="`GenericWorkload` beta and off by default in 1.37, `scheduling.k8s.io/v1beta1` disabled by default (kubernetes v1.37.2 `pkg/features/kube_features.go`, `pkg/controlplane/instance.go`)",
        fix="run kube-apiserver with --runtime-config=…=true and kube-apiserver and kube-scheduler with --feature-gates=…=true, or declare it: --feature-gate …=true",
    ),
}


def document(rule_id: str, doc: RuleDoc) -> None:
    """Register the doc of a rule defined outside the seeded table (a new checks module)."""
    RULE_DOCS.setdefault(rule_id, doc)


# The dependents rules (checks/rules_dependents.py; every source in docs/dependents.md).
_DEPENDENTS = "docs/dependents.md, with every source"
for _id, _when, _why, _fix in (
    ("quota-continuity", "a ResourceQuota limits a device-plugin GPU name",
     "the quota evaluator counts DRA claims under <class>.deviceclass.resource.k8s.io/devices, and a quota with scopes never counts a claim (kubernetes v1.37.2 pkg/quota/v1/evaluator/core/resource_claims.go): a GPU cap written for the device plugin stops capping migrated pods",
     "add the DRA limit the plan proposes beside the old one before migrating (the finding names it)"),
    ("limitrange-gpu", "a LimitRange names a GPU resource (max, min, default, defaultRequest)",
     "the API server fills a Container item's default limit from its max and its default request from them or the min (kubernetes v1.37.2 pkg/apis/core/v1/defaults.go), and the LimitRanger gives every container that names none of it those defaults, then refuses a pod with no request under a min or no limit under a max (plugin/pkg/admission/limitranger/admission.go): a pod converted to a ResourceClaim gets the device-plugin GPU back beside its claim, or is refused",
     "take the GPU name out of the LimitRange before converting its namespace's workloads; cap claims with a ResourceQuota on <class>.deviceclass.resource.k8s.io/devices"),
    ("kueue-dra-support", "a Kueue ClusterQueue budgets GPUs",
     "Kueue admits and counts DRA-backed extended resources only in some configurations; a queue that cannot count them stops admitting GPU jobs after the migration (" + _DEPENDENTS + ")",
     "move the GPU budget to flavors Kueue can count under DRA before migrating, or keep these pools on the device plugin"),
    ("scheduler-dra-support", "GPU pods run under a scheduler other than kube-scheduler",
     "a scheduler without DRA support cannot place pods whose GPUs become claims or DRA-backed extended resources (" + _DEPENDENTS + ")",
     "upgrade that scheduler to a release with DRA support, or keep its pools on the device plugin (plan --exclude-pools)"),
    ("dcgm-dra-attribution", "a DCGM exporter attributes GPU metrics to pods",
     "under DRA the exporter needs to read ResourceSlices to map devices to pods; without the permission per-pod GPU metrics go blank (NVIDIA/gpu-operator PR #2697)",
     "let the exporter get/list/watch resource.k8s.io resourceslices and give it a ServiceAccount token"),
    ("prometheus-rule-gpu", "alerting or recording rules read GPU extended-resource metrics",
     "kube-state-metrics' extended-resource series of a migrated node change or vanish, so alerts on them go silent (" + _DEPENDENTS + ")",
     "rewrite the rules on the DRA series (or DCGM's) before migrating the pools they watch"),
    ("grafana-dashboard-gpu", "a Grafana dashboard's panels or variables read GPU extended-resource or per-pod DCGM metrics",
     "kube-state-metrics' nvidia_com_gpu series of migrated nodes and converted workloads vanish, and DCGM's per-pod labels go blank without attribution, so the dashboard shows zero GPUs (" + _DEPENDENTS + ")",
     "count GPUs from DCGM series (count by (Hostname) (DCGM_FI_DEV_GPU_UTIL)) in the dashboard's source before migrating; check by hand a dashboard the tool could not read"),
    ("volcano-queue-dra", "a Volcano Queue caps, shares or reserves nvidia.com/gpu by name",
     "Volcano counts ResourceClaims against a queue only under deviceclass/<DeviceClass> keys of its capacity plugin (volcano-sh/volcano PR #5058), and not at all before (volcano-sh/volcano#4400): converted workloads escape a queue that names only nvidia.com/gpu (" + _DEPENDENTS + ")",
     "add the deviceclass/<class> key with the same value beside the device-plugin key, on a Volcano whose capacity plugin counts claims"),
    ("gpu-metric-autoscaling", "a KEDA trigger or an HPA scales a workload on nvidia_com_gpu or per-pod DCGM metrics",
     "those series vanish or lose their pod label as nodes migrate; KEDA's prometheus scaler reads an empty result as 0 (ignoreNullValues, default true; kedacore/keda pkg/scalers/prometheus_scaler.go) and scales serving down, an HPA stops scaling (" + _DEPENDENTS + ")",
     "scale on DCGM series by Hostname or on the workload's own metrics, or have the DCGM exporter attribute DRA GPUs (KUBERNETES_ENABLE_DRA) before migrating"),
    ("admission-policy-gpu", "a ValidatingAdmissionPolicy, MutatingAdmissionPolicy, Kyverno or Gatekeeper policy names nvidia.com/gpu",
     "a pod whose GPUs come from a ResourceClaim requests no nvidia.com/gpu, so a policy that selects pods by that request no longer limits or changes it: a GPU allow-list any namespace steps around with a claim, a toleration or runtime class a converted pod lacks (" + _DEPENDENTS + ")",
     "extend validating policies to spec.resourceClaims and to ResourceClaims; write what mutating ones add into the converted workloads"),
    ("gitops-owned", "an object the migration changes is owned by a GitOps controller",
     "Argo CD or Flux reverts a change made outside the repository, undoing the migration step (" + _DEPENDENTS + ")",
     "make the change in the owning repository (convert and generate write the files); apply does not patch them"),
):  # fmt: skip
    document(_id, RuleDoc(when=_when, rests_on=_why, fix=_fix))

# The platform rules (checks/rules_platforms.py; every source in docs/platforms/, one page a platform).
_GKE_DRA = "https://cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra"
_EKS_DRA = "https://docs.aws.amazon.com/eks/latest/userguide/device-management-nvidia-dra-device-plugin.html"
for _id, _when, _why, _fix in (
    ("platform-sharing-unsupported", "a GKE pool time-shares or MIG-partitions its GPUs (gke-gpu-sharing-strategy labels)",
     "GKE offers no GPU time-sharing, MIG or MPS with DRA (" + _GKE_DRA + "): the shared slices have no DRA equivalent there",
     "keep the pool on GKE's device plugin (plan --exclude-pools), or move its workloads to whole GPUs first"),
    ("platform-replace-pool", "the platform runs the pool's GPU stack (GKE's managed plugin, AKS's GPU pool, Bottlerocket): the plan replaces the pool",
     "where the platform owns the node's GPU configuration an in-place label flip is impossible or reverted; DRA needs a node pool created for it (docs/platforms/)",
     "run the command the plan's provision stage names; secure quota and headroom for both pools at once"),
    ("replace-pool-pinned-workloads", "pods of a pool to replace select its nodes by something the new pool's nodes will not carry (the pool's own name)",
     "a drained pod whose nodeSelector or required affinity matches only the old pool stays Pending, and the wave's health gate rolls back",
     "select by a label both pools carry (e.g. the GPU product) before migrating, or let the new pool carry the old selector"),
    ("autoscaler-dra-from-zero", "the replaced pool's autoscaler (Karpenter, cluster-autoscaler) may not bring up a DRA node from zero",
     "Karpenter provisions for DRA claims from 1.15 with its DRA feature gates; cluster-autoscaler simulates DRA only with --enable-dynamic-resource-allocation and a node template that declares the devices (kubernetes/autoscaler#7804; docs/platforms/autoscalers.md); not raised on EKS Auto Mode, whose provisioner AWS runs and which keeps the plan's spec.replicas natively (docs.aws.amazon.com/eks/latest/userguide/auto-static-capacity.html)",
     "configure the autoscaler as the finding says; the plan keeps the old nodes (do-not-disrupt / scale-down-disabled) until the new pool is proven"),
    ("karpenter-consolidates-drained-node", "a pool switched in place runs on a Karpenter NodePool whose consolidateAfter is not Never",
     "Karpenter does not spare a cordoned node from disruption (sigs.k8s.io/karpenter state/statenode.go, ValidateNodeDisruptable); a drained node is empty, and consolidation removes it after consolidateAfter, before its DRA plugin is up",
     "nothing: the plan keeps karpenter.sh/do-not-disrupt on each node from before its cordon to after its uncordon; lengthen expireAfter if the migration could outlast it"),
    ("in-place-pool-template", "a pool switched in place belongs to a node group (GKE node pool, EKS node group, AKS node pool, Karpenter NodePool, MachineSet) whose template lacks the plan's switch labels",
     "a node group gives the nodes it makes its template's labels, not those set on each node since (GKE node pool labels, EKS UpdateNodegroupConfig labels, AKS nodepool update --labels, MachineSet spec.template.spec.metadata.labels, Karpenter spec.template.metadata.labels, whose change drifts the pool's nodes: karpenter.sh/docs/concepts/disruption/#drift); a scale-up, repair or upgrade brings device-plugin nodes back",
     "once the pool's stage is done, add the switch labels to the node group's labels (on Karpenter, as a planned disruption)"),
    ("platform-plugin-conflict", "a GKE GPU pool runs GKE's managed device plugin and a device-plugin DaemonSet at once",
     "GKE requires gke-no-default-nvidia-gpu-device-plugin=true where the GPU Operator or another plugin runs (" + _GKE_DRA + "); two plugins advertise one GPU twice",
     "label the pool's nodes gke-no-default-nvidia-gpu-device-plugin=true (a new pool), or remove the DaemonSet from it"),
    ("openshift-machine-config-update", "an OpenShift GPU node still to migrate has its machine config daemon state other than Done, or a desiredConfig that is not its currentConfig",
     "the Machine Config Operator cordons, drains, reboots and uncordons a node it updates (openshift/machine-config-operator pkg/daemon/constants/constants.go, desiredDrain uncordon-<config>): a node mid-migration goes back into service before its canary",
     "let the MachineConfigPool finish, then pause it for the migration (spec.paused: true) and unpause it after"),
    ("eks-auto-mode-dra-version", "EKS Auto Mode nodes on a Kubernetes version before 1.36",
     "EKS Auto Mode serves DRA only from Kubernetes 1.36 (" + _EKS_DRA + ")",
     "upgrade the cluster to 1.36 or later, or migrate these pools to managed node groups first"),
):  # fmt: skip
    document(_id, RuleDoc(when=_when, rests_on=_why, fix=_fix))
