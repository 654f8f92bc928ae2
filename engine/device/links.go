package device

// How two GPUs reach each other, fastest first: the values of Device.Links.
// The PCIe kinds follow NVML's topology levels (nvmlGpuTopologyLevel_t).
const (
	LinkNVLink      = "nvlink"       // NVLink, directly or through NVSwitch
	LinkSameBoard   = "same-board"   // two GPUs on one card
	LinkPCIeSwitch  = "pcie-switch"  // behind the same PCIe switch (or switches)
	LinkHostBridge  = "host-bridge"  // through one CPU's PCIe host bridge
	LinkNUMANode    = "numa-node"    // across host bridges of one CPU socket
	LinkCrossSocket = "cross-socket" // across CPU sockets (SMP interconnect)
	// LinkPeer is direct peer access over a link the source cannot name:
	// the CUDA driver API's inventory says whether two GPUs reach each
	// other, not whether through NVLink or PCIe.
	LinkPeer = "peer"
)

// KnownLink reports whether kind is one of the Link* constants.
func KnownLink(kind string) bool {
	switch kind {
	case LinkNVLink, LinkSameBoard, LinkPCIeSwitch, LinkHostBridge, LinkNUMANode, LinkCrossSocket, LinkPeer:
		return true
	}
	return false
}
