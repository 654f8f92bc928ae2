package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/kernels/quant"
)

// KVTypes are the element types of the K and V caches, which may differ
// (llama.cpp's -ctk and -ctv).
type KVTypes struct{ K, V quant.Type }

// SameKV is K and V both of type t.
func SameKV(t quant.Type) KVTypes { return KVTypes{t, t} }

// DefaultKVType is the cache type of K and V when none is named.
const DefaultKVType = quant.F16

// kvTypes are the cache types, in the order a menu offers them.
func kvTypes() []quant.Type { return []quant.Type{quant.F16, quant.Q8_0, quant.Q4_0, quant.F32} }

// ParseKVType reads a cache type as typed on a command line or stored in
// settings: "f16", "q8_0", "q4_0" or "f32", any case; "" is DefaultKVType.
func ParseKVType(s string) (quant.Type, error) {
	if s == "" {
		return DefaultKVType, nil
	}
	t, err := quant.ParseType(strings.ToUpper(s))
	if err != nil || !slices.Contains(kvTypes(), t) {
		return 0, fmt.Errorf("plan: KV cache type %q (want f16, q8_0, q4_0 or f32)", s)
	}
	return t, nil
}

// ParseKVTypes reads the K and V cache types: kv names both, v (when not
// empty) overrides V's, as llama.cpp's -ctv does.
func ParseKVTypes(kv, v string) (KVTypes, error) {
	k, err := ParseKVType(kv)
	if err != nil {
		return KVTypes{}, err
	}
	t := SameKV(k)
	if v != "" {
		if t.V, err = ParseKVType(v); err != nil {
			return KVTypes{}, err
		}
	}
	return t, nil
}

// KVTypeName is the name ParseKVType reads for t ("q8_0").
func KVTypeName(t quant.Type) string { return strings.ToLower(t.String()) }

// String is "q8_0", or "K q8_0, V q4_0" when they differ.
func (t KVTypes) String() string {
	if t.K == t.V {
		return KVTypeName(t.K)
	}
	return "K " + KVTypeName(t.K) + ", V " + KVTypeName(t.V)
}

// RunsOn reports whether a backend of kind k writes and attends caches of
// these types. This is a static table, kept here because a plan is made
// before any device is opened; engine's TestKVTypesMatchBackends holds it
// to each backend's Supports. The CPU and the CUDA kernels run every
// cache type, K and V independently.
func (t KVTypes) RunsOn(k device.Kind) bool {
	switch k {
	case device.CPU, device.CUDA:
		return slices.Contains(kvTypes(), t.K) && slices.Contains(kvTypes(), t.V)
	}
	return false
}

// RunsOnAll reports whether every device of devs runs these cache types.
func (t KVTypes) RunsOnAll(devs []device.Device) bool {
	for _, d := range devs {
		if !t.RunsOn(d.Kind) {
			return false
		}
	}
	return true
}

// MarshalText writes t as String does, so a Change reads "q8_0" in JSON.
func (t KVTypes) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// KVChoices are the cache types, K and V alike, that every device of devs
// can run, in the order a menu offers them.
func KVChoices(devs []device.Device) []quant.Type {
	var out []quant.Type
	for _, t := range kvTypes() {
		if SameKV(t).RunsOnAll(devs) {
			out = append(out, t)
		}
	}
	return out
}
