package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tandem-run/tandem/engine/gguf"
)

// Holder is a device holding (or using) rows of the head or the embedding:
// all of them, or its vocabulary range when they are split.
type Holder struct {
	Device int
	Rows   Range
}

// model is one model's layout while a plan is made.
type model struct {
	role  Role
	file  *gguf.File
	shape Shape
	p     Placement // resolved

	blockDev []int     // layer split: the device of each block
	kvHeads  [][]Range // tensor split: [block][i] KV heads of p.Devices[i]
	ffnRows  [][]Range // tensor split: [block][i] FFN rows of p.Devices[i]

	headName, embdName string // tensors serving as head and embedding
	headFile, embdFile Role   // whose file holds them
	borrowed           []string
	inPlace            bool // borrowed tensors are used where the target keeps them

	headStore []Holder // where head rows are stored (a replica per device when replicated)
	headRun   []Holder // where the head's matmul runs
	embdStore []Holder
	embdRun   []Holder // where embedding lookups run (several: vocabulary-parallel)
	normDevs  []int    // where output_norm lives

	tensors []Tensor
}

// newModel resolves a model's layout: blocks or slices per device, and where
// its head and embedding are stored and run. target is nil for the target.
func newModel(role Role, f *gguf.File, p Placement, target *model) (*model, error) {
	shape, err := readShape(f)
	if err != nil {
		return nil, fmt.Errorf("plan: %s %s: %w: %w", role, f.Path, ErrBadHeader, err)
	}
	m := &model{role: role, file: f, shape: shape, p: p}
	if err := m.resolveHeadAndEmbedding(target); err != nil {
		return nil, err
	}
	if err := m.assignBlocks(); err != nil {
		return nil, err
	}
	if err := m.placeTensors(target); err != nil {
		return nil, err
	}
	return m, nil
}

// resolveHeadAndEmbedding finds the head and embedding tensors (the model's
// own, tied, or borrowed from the target) and the devices that store and run them.
func (m *model) resolveHeadAndEmbedding(target *model) error {
	if err := m.findHeadAndEmbedding(target); err != nil {
		return err
	}
	devs := m.p.Devices
	vocab := Range{0, m.shape.Vocab}
	switch m.p.Head {
	case HeadSingle:
		m.headStore = []Holder{{m.p.HeadDevice, vocab}}
		m.headRun = m.headStore
	case HeadReplicated:
		for _, d := range devs {
			m.headStore = append(m.headStore, Holder{d, vocab})
		}
		m.headRun = []Holder{{devs[len(devs)-1], vocab}}
	case HeadSplit:
		rows := splitByRatio(m.shape.Vocab, 1, m.p.Ratios)
		for i, d := range devs {
			m.headStore = append(m.headStore, Holder{d, rows[i]})
		}
		m.headRun = m.headStore
	}
	m.normDevs = holderDevices(m.headStore)
	if m.tied() { // look tokens up where the head is stored
		m.embdStore, m.embdRun = m.headStore, m.headStore
		if m.p.Head == HeadReplicated {
			m.embdRun = []Holder{{devs[0], vocab}}
		}
	} else {
		m.embdStore = []Holder{{devs[0], vocab}}
		m.embdRun = m.embdStore
	}
	if m.inPlace {
		m.useInPlace(target)
	}
	return nil
}

// findHeadAndEmbedding names the tensors that serve as head and embedding:
// output.weight, or the token embedding when tied; a draft lacking them
// borrows the target's (an EAGLE-3 or DFlash draft never ties its own).
func (m *model) findHeadAndEmbedding(target *model) error {
	f := m.file
	_, hasEmbd := f.Tensor(nameEmbd)
	_, hasHead := f.Tensor(nameHead)
	if hasEmbd {
		m.embdName, m.embdFile = nameEmbd, m.role
	}
	if hasHead {
		m.headName, m.headFile = nameHead, m.role
	} else if hasEmbd && m.shape.Arch != archEagle3 && m.shape.Arch != archDFlash {
		m.headName, m.headFile = nameEmbd, m.role
	}
	if target != nil {
		if m.embdName == "" {
			m.embdName, m.embdFile = target.embdName, Target
			m.borrowed = append(m.borrowed, target.embdName)
		}
		if m.headName == "" {
			m.headName, m.headFile = target.headName, Target
			m.borrowed = appendNewName(m.borrowed, target.headName)
			m.shape.Vocab = target.shape.Vocab
		}
		m.inPlace = len(m.borrowed) > 0 && m.p.Borrow == BorrowInPlace
	}
	if m.headName == "" || m.embdName == "" {
		return fmt.Errorf("plan: %s %s: no %s or %s (a draft without them needs a target to borrow from)", m.role, f.Path, nameEmbd, nameHead)
	}
	m.shape.Tied = m.tied()
	for _, name := range m.borrowed {
		t, _ := target.file.Tensor(name)
		if t.Dims[0] != m.shape.Embd {
			return fmt.Errorf("plan: draft %s borrows the target's %s of width %d, but its hidden size is %d", f.Path, name, t.Dims[0], m.shape.Embd)
		}
	}
	return nil
}

// tied reports whether one tensor serves as both embedding and head.
func (m *model) tied() bool { return m.embdName == m.headName && m.embdFile == m.headFile }

func appendNewName(names []string, name string) []string {
	if slices.Contains(names, name) {
		return names
	}
	return append(names, name)
}

// useInPlace points a draft's head and embedding at the target's copies: one
// on the draft's own devices if there is one, else where the target runs them.
func (m *model) useInPlace(target *model) {
	local := func(store []Holder) (Holder, bool) {
		for _, h := range store {
			if slices.Contains(m.p.Devices, h.Device) && h.Rows.Len() == m.shape.Vocab {
				return h, true
			}
		}
		return Holder{}, false
	}
	if m.headFile == Target {
		if h, ok := local(target.headStore); ok {
			m.headRun = []Holder{h}
		} else {
			m.headRun = target.headRun
		}
		m.headStore = nil
		m.normDevs = []int{m.p.Devices[len(m.p.Devices)-1]} // normalise, then send
	}
	if m.embdFile == Target {
		if h, ok := local(target.embdStore); ok {
			m.embdRun = []Holder{h}
		} else {
			m.embdRun = target.embdRun
		}
		m.embdStore = nil
	}
}

// assignBlocks gives whole blocks to devices (layer split) or cuts each
// block's heads and FFN rows across them (tensor split).
func (m *model) assignBlocks() error {
	devs, n := m.p.Devices, m.shape.Blocks
	if m.p.Split == SplitLayer {
		m.blockDev = make([]int, n)
		for i, r := range splitByRatio(int64(n), 1, m.p.Ratios) {
			if r.Len() == 0 && !slices.Contains(holderDevices(m.headStore), devs[i]) {
				return &IdleDeviceError{Role: m.role, Device: devs[i], Blocks: n, Share: m.p.Ratios[i]}
			}
			for b := r.Lo; b < r.Hi; b++ {
				m.blockDev[b] = devs[i]
			}
		}
		return nil
	}
	m.kvHeads = make([][]Range, n)
	m.ffnRows = make([][]Range, n)
	for b := range n {
		m.kvHeads[b] = splitByRatio(m.shape.KVHeads[b], 1, m.p.Ratios)
		// The FFN's rows are ffn_down's columns: cut them on whole quant
		// blocks, and on whole 32-value groups, the width the GPU kernels
		// and the 8-bit activation blocks work in.
		unit := int64(splitGroup)
		if down, ok := m.file.Tensor(fmt.Sprintf("blk.%d.ffn_down.weight", b)); ok {
			unit = max(unit, int64(down.Type.BlockSize()))
		}
		m.ffnRows[b] = splitByRatio(m.shape.FFN[b], unit, m.p.Ratios)
	}
	return nil
}

// splitGroup is the smallest piece of a row a tensor split cuts: the CUDA
// products take widths in whole 32-value groups.
const splitGroup = 32

// blockDevices are the devices that run blocks.
func (m *model) blockDevices() []int {
	if m.p.Split == SplitTensor {
		return m.p.Devices
	}
	var out []int
	for _, d := range m.blockDev {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// placeTensors makes the model's Tensor list: its own tensors in file order,
// then copies of borrowed target tensors (BorrowCopy).
func (m *model) placeTensors(target *model) error {
	for i := range m.file.Tensors {
		t := &m.file.Tensors[i]
		pt, err := m.place(t, m.role)
		if err != nil {
			return fmt.Errorf("plan: %s %s: %w", m.role, m.file.Path, err)
		}
		m.tensors = append(m.tensors, pt)
	}
	if m.p.Experts == ExpertsOnDevice && !slices.ContainsFunc(m.tensors, func(t Tensor) bool { return t.Class == ClassExperts }) {
		return fmt.Errorf("plan: %s %s: experts on device %d, but the model has no routed experts", m.role, m.file.Path, m.p.ExpertDevice)
	}
	if m.inPlace {
		return nil
	}
	for _, name := range m.borrowed {
		t, _ := target.file.Tensor(name)
		pt, err := m.place(t, Target)
		if err != nil {
			return fmt.Errorf("plan: draft's copy of the target's %s: %w", name, err)
		}
		m.tensors = append(m.tensors, pt)
	}
	return nil
}

// place decides the shards of one tensor from file (the model's own, or the
// target's for a borrowed copy).
func (m *model) place(t *gguf.TensorInfo, file Role) (Tensor, error) {
	isHead := t.Name == m.headName && file == m.headFile
	isEmbd := t.Name == m.embdName && file == m.embdFile
	switch {
	case isHead:
		return m.spread(newTensor(t, file, m.role, ClassHead, -1), t, m.headStore)
	case isEmbd:
		return m.spread(newTensor(t, file, m.role, ClassEmbedding, -1), t, m.embdStore)
	case t.Name == nameHeadBias:
		return m.spread(newTensor(t, file, m.role, ClassHead, -1), t, m.headStore)
	case t.Name == nameHeadNorm || t.Name == nameHeadNormB:
		return mirror(newTensor(t, file, m.role, ClassHead, -1), t, m.normDevs), nil
	}
	if b, suffix, ok := blockOf(t.Name); ok {
		if m.p.Experts == ExpertsOnDevice && isExpert(suffix) {
			pt := newTensor(t, file, m.role, ClassExperts, b)
			pt.Shards = []Shard{whole(t, m.p.ExpertDevice)}
			return pt, nil
		}
		return m.placeBlockTensor(newTensor(t, file, m.role, ClassWeights, b), t, b, suffix)
	}
	pt := newTensor(t, file, m.role, ClassWeights, -1)
	if strings.HasPrefix(t.Name, "rope_") { // rope frequency factors: every block uses them
		return mirror(pt, t, m.blockDevices()), nil
	}
	pt.Shards = []Shard{whole(t, m.p.Devices[0])}
	return pt, nil
}

// spread places a head or embedding tensor on its holders: whole copies, or
// vocabulary rows (the last dimension; the only one of a bias).
func (m *model) spread(pt Tensor, t *gguf.TensorInfo, hs []Holder) (Tensor, error) {
	last := len(t.Dims) - 1
	for _, h := range hs {
		s, err := shard(t, h.Device, last, h.Rows)
		if err != nil {
			return pt, err
		}
		pt.Shards = append(pt.Shards, s)
	}
	return pt, nil
}

func mirror(pt Tensor, t *gguf.TensorInfo, devs []int) Tensor {
	for _, d := range devs {
		pt.Shards = append(pt.Shards, whole(t, d))
	}
	return pt
}

// placeBlockTensor puts a block tensor on its block's device (layer split)
// or cuts it across all devices (tensor split).
func (m *model) placeBlockTensor(pt Tensor, t *gguf.TensorInfo, b int, suffix string) (Tensor, error) {
	if m.p.Split == SplitLayer {
		pt.Shards = []Shard{whole(t, m.blockDev[b])}
		return pt, nil
	}
	r, err := tensorSplitRule(suffix, t.Dims)
	if err != nil {
		return pt, fmt.Errorf("%s: %w", t.Name, err)
	}
	switch r {
	case ruleOnce:
		pt.Shards = []Shard{whole(t, m.p.Devices[0])}
		return pt, nil
	case ruleMirror:
		return mirror(pt, t, m.p.Devices), nil
	}
	s := m.shape
	group := s.Heads[b] / s.KVHeads[b]
	last := len(t.Dims) - 1
	for i, d := range m.p.Devices {
		kv, ffn := m.kvHeads[b][i], m.ffnRows[b][i]
		var dim int
		var rng Range
		switch r {
		case ruleQRows:
			dim, rng = last, scale(kv, group*s.HeadDimK)
		case ruleKRows:
			dim, rng = last, scale(kv, s.HeadDimK)
		case ruleVRows:
			dim, rng = last, scale(kv, s.HeadDimV)
		case ruleQCols:
			dim, rng = 0, scale(kv, group*s.HeadDimV)
		case ruleFFNRows:
			dim, rng = last, ffn
		case ruleFFNCols:
			dim, rng = 0, ffn
		}
		if rng.Hi > t.Dims[dim] {
			return pt, fmt.Errorf("%s: shape %v does not match the model's heads or FFN width", t.Name, t.Dims)
		}
		sh, err := shard(t, d, dim, rng)
		if err != nil {
			return pt, err
		}
		pt.Shards = append(pt.Shards, sh)
	}
	return pt, nil
}

func scale(r Range, k int64) Range { return Range{r.Lo * k, r.Hi * k} }

func holderDevices(hs []Holder) []int {
	out := make([]int, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.Device)
	}
	return out
}
