package model

import (
	"context"
	"fmt"
	"slices"

	"github.com/tandem-run/tandem/kernels"
)

// capture is what a Placed model hands an EAGLE-3 draft: the inputs of
// some blocks for every position it processes, gathered on the host from
// whichever device runs each block.
type capture struct {
	layers []int
	fn     func(pos int, hidden []float32) error
	host   []float32 // [batch, len(layers)*n_embd]
}

// Capture makes every Forward hand fn, after each chunk, the inputs of
// blocks layers (Layers itself names the final hidden state before the
// output norm) for the chunk's positions pos, pos+1, ...: hidden is
// [n, len(layers)*n_embd] row-major on the host, layer by layer along each
// row, as Options.OnCapture lays them out, and valid only during the call.
// Each block's input is read from the device that runs the block. No
// layers turns capturing off.
func (m *Placed) Capture(layers []int, fn func(pos int, hidden []float32) error) error {
	for _, l := range layers {
		if l < 0 || l > m.params.Layers {
			return fmt.Errorf("model: capture of block %d in a %d-block model: %w", l, m.params.Layers, ErrBadParam)
		}
	}
	if len(layers) == 0 {
		m.cap = nil
		return nil
	}
	if fn == nil {
		return fmt.Errorf("model: capture of blocks %v with no receiver: %w", layers, ErrBadParam)
	}
	m.cap = &capture{layers: slices.Clone(layers), fn: fn, host: make([]float32, m.batch*len(layers)*m.params.Embd)}
	// Programs compiled without the capture's boundaries go.
	for _, pt := range m.parts {
		for k, p := range pt.progs {
			if k.kind == progStage {
				_ = p.Close()
				delete(pt.progs, k)
			}
		}
	}
	return nil
}

// captures reports whether the input of block l is captured.
func (m *Placed) captures(l int) bool {
	return m.cap != nil && slices.Contains(m.cap.layers, l)
}

// keep stores b rows of block l's input, src [b, n_embd] on the host, in
// the capture's columns of l.
func (m *Placed) keep(l, b int, src []float32) {
	e, w := m.params.Embd, len(m.cap.layers)*m.params.Embd
	for i, c := range m.cap.layers {
		if c != l {
			continue
		}
		for r := range b {
			copy(m.cap.host[r*w+i*e:r*w+(i+1)*e], src[r*e:(r+1)*e])
		}
	}
}

// keepFrom reads block l's input, src [b, n_embd] on pt, and keeps it.
func (m *Placed) keepFrom(pt *part, l int, src kernels.Tensor) error {
	if !m.captures(l) {
		return nil
	}
	rows := m.partial[:src.Rows*m.params.Embd]
	if err := pt.be.Read(kernels.F32Bytes(rows), src); err != nil {
		return fmt.Errorf("model: capture of block %d from device %d: %w", l, pt.dev, err)
	}
	m.keep(l, src.Rows, rows)
	return nil
}

// handOver gives the chunk's captures, b rows at pos, to the receiver.
func (m *Placed) handOver(pos, b int) error {
	if m.cap == nil {
		return nil
	}
	if err := m.cap.fn(pos, m.cap.host[:b*len(m.cap.layers)*m.params.Embd]); err != nil {
		return fmt.Errorf("model: capture: %w", err)
	}
	return nil
}

// segments cuts a layer-split part's blocks into runs that start at a
// captured block, so the stream can be read there: [lo, hi) pairs.
func (m *Placed) segments(pt *part) [][2]int {
	var out [][2]int
	for l, lb := range pt.local {
		if !lb.present() {
			continue
		}
		if n := len(out); n == 0 || out[n-1][1] != l || m.captures(l) {
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
func (m *Placed) lookUp(ctx context.Context, tokens []int32, dst []float32) error {
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
