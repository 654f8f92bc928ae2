package model

import (
	"context"
	"fmt"
	"slices"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// capture is what a model hands an EAGLE-3 draft: the inputs of some
// blocks for every position it processes, written into the draft's
// features buffer. Where every captured input is computed on the
// features' device, the programs copy them there (direct); otherwise each
// is read to the host from the device that runs its block, and the rows
// are written across once the chunk is done.
type capture struct {
	layers []int
	be     kernels.Backend
	dst    kernels.Tensor // [batch, len(layers)*n_embd] on be
	fn     func(pos, n int) error
	direct bool
	host   []float32 // [batch, len(layers)*n_embd] when not direct
	paused bool      // PauseCapture: passes neither copy nor hand over
	// handed and skipped count the chunks handed over and those a pause
	// kept back (CaptureCounts).
	handed, skipped int
}

// CaptureCounts is how many chunks of passes handed their states over to
// the capture's receiver, and how many ran paused (PauseCapture), since
// Capture; zeros without a capture.
func (m *Model) CaptureCounts() (handed, skipped int) {
	if m.cap == nil {
		return 0, 0
	}
	return m.cap.handed, m.cap.skipped
}

// PauseCapture turns the capture's copies and hand-overs off (paused) or
// back on for the passes that follow, keeping the receiver: a pass that
// no draft will read, while drafting is off, then costs what the target
// alone does. The programs of either kind are kept apart (progKey.bare),
// so switching compiles each once. The receiver misses the states of
// the paused passes. Without a capture it does nothing.
func (m *Model) PauseCapture(paused bool) {
	if m.cap == nil || m.cap.paused == paused {
		return
	}
	m.cap.paused = paused
	for _, pt := range m.parts {
		pt.progs.bare = paused
	}
}

// capturing reports whether passes capture now.
func (m *Model) capturing() bool { return m.cap != nil && !m.cap.paused }

// Capture makes every Forward write the inputs of blocks layers (Layers
// itself names the final hidden state before the output norm) for each
// chunk's positions into dst, a packed [batch, len(layers)*n_embd] F32
// tensor of be, layer by layer along each row, and then call fn(pos, n)
// for the chunk's n positions from pos; dst holds them during the call.
// No layers turns capturing off.
func (m *Model) Capture(layers []int, be kernels.Backend, dst kernels.Tensor, fn func(pos, n int) error) error {
	for _, l := range layers {
		if l < 0 || l > m.params.Layers {
			return fmt.Errorf("model: capture of block %d in a %d-block model: %w", l, m.params.Layers, ErrBadParam)
		}
	}
	// Programs compiled with or without the capture's copies go.
	for _, pt := range m.parts {
		if err := pt.progs.close(); err != nil {
			return fmt.Errorf("model: capture: %w", err)
		}
		pt.progs.bare = false
	}
	if len(layers) == 0 {
		m.cap = nil
		return nil
	}
	width := len(layers) * m.params.Embd
	switch {
	case fn == nil || be == nil:
		return fmt.Errorf("model: capture of blocks %v with no receiver: %w", layers, ErrBadParam)
	case dst.Type != quant.F32 || dst.Rows < m.batch || dst.Cols != width || !dst.Packed():
		return fmt.Errorf("model: capture of blocks %v into %v, want F32 [%d,%d]: %w", layers, dst, m.batch, width, ErrShape)
	}
	c := &capture{layers: slices.Clone(layers), be: be, dst: dst, fn: fn, direct: true}
	for _, l := range layers {
		c.direct = c.direct && m.inputOf(l).be == be
	}
	if !c.direct {
		c.host = make([]float32, m.batch*width)
	}
	m.cap = c
	return nil
}

// inputOf is the part whose stream holds block l's input (l == Layers: the
// final state) when it is captured.
func (m *Model) inputOf(l int) *part {
	if !m.layered {
		if l == m.params.Layers {
			return m.byDev[m.head[0].Device]
		}
		return m.parts[0]
	}
	for _, pt := range m.parts {
		if pt.local[min(l, m.params.Layers-1)].present() {
			return pt
		}
	}
	return m.parts[0]
}

// captures reports whether the input of block l is captured.
func (m *Model) captures(l int) bool {
	return m.capturing() && slices.Contains(m.cap.layers, l)
}

// captureOps copies x, block l's input on pt, into its columns of the
// capture buffer, when the capture is direct.
func (m *Model) captureOps(pt *part, l int, x kernels.Tensor) []kernels.Op {
	if !m.captures(l) || !m.cap.direct || m.inputOf(l) != pt {
		return nil
	}
	var ops []kernels.Op
	e := m.params.Embd
	for i, c := range m.cap.layers {
		if c == l {
			ops = append(ops, kernels.Copy{Dst: m.cap.dst.RowSlice(0, x.Rows).ColSlice(i*e, e), Src: x})
		}
	}
	return ops
}

// keepFrom reads block l's input, src [b, n_embd] on pt, into the host
// rows of a capture that is not direct.
func (m *Model) keepFrom(pt *part, l int, src kernels.Tensor) error {
	if !m.captures(l) || m.cap.direct {
		return nil
	}
	rows := m.partial[:src.Rows*m.params.Embd]
	if err := pt.be.Read(kernels.F32Bytes(rows), src); err != nil {
		return fmt.Errorf("model: capture of block %d from device %d: %w", l, pt.dev, err)
	}
	e, w := m.params.Embd, len(m.cap.layers)*m.params.Embd
	for i, c := range m.cap.layers {
		if c != l {
			continue
		}
		for r := range src.Rows {
			copy(m.cap.host[r*w+i*e:r*w+(i+1)*e], rows[r*e:(r+1)*e])
		}
	}
	return nil
}

// handOver gives the chunk's captures, b rows at pos, to the receiver.
func (m *Model) handOver(pos, b int) error {
	if m.cap == nil {
		return nil
	}
	if m.cap.paused {
		m.cap.skipped++
		return nil
	}
	m.cap.handed++
	if !m.cap.direct {
		w := len(m.cap.layers) * m.params.Embd
		if err := m.cap.be.Write(m.cap.dst.RowSlice(0, b), kernels.F32Bytes(m.cap.host[:b*w])); err != nil {
			return fmt.Errorf("model: capture: %w", err)
		}
	}
	if err := m.cap.fn(pos, b); err != nil {
		return fmt.Errorf("model: capture: %w", err)
	}
	return nil
}

// segments cuts a layer-split part's blocks into runs that start at a
// block whose input is read back to the host, so the stream can be read
// there: [lo, hi) pairs.
func (m *Model) segments(pt *part) [][2]int {
	var out [][2]int
	for l, lb := range pt.local {
		if !lb.present() {
			continue
		}
		if n := len(out); n == 0 || out[n-1][1] != l || m.captures(l) && !m.cap.direct {
			out = append(out, [2]int{l, l + 1})
		} else {
			out[n-1][1] = l + 1
		}
	}
	return out
}

// lookUp embeds tokens where the model keeps its embedding, for a draft
// that borrows it in place: the rows land in dst [len(tokens), n_embd] on
// the host. It uses the scratch of the model's passes, free between them.
func (m *Model) lookUp(ctx context.Context, tokens []int32, dst []float32) error {
	b, e := len(tokens), m.params.Embd
	if b > m.batch {
		return fmt.Errorf("model: %d lookups in a batch of %d: %w", b, m.batch, ErrBadParam)
	}
	copy(m.tokens, tokens)
	local, err := m.embed(ctx, b)
	if err != nil {
		return err
	}
	if local == nil {
		copy(dst[:b*e], m.hostX[:b*e])
		return nil
	}
	if err := local.be.Read(kernels.F32Bytes(dst[:b*e]), local.embedDst(b)); err != nil {
		return fmt.Errorf("model: embedding from device %d: %w", local.dev, err)
	}
	return nil
}
