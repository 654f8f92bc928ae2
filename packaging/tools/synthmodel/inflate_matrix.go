package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/synth"
)

// Codes of an axis entry that has no source index.
const (
	// free entries only ever meet zeros (a column whose input is always
	// zero, a row whose output nothing reads): random at the real weights'
	// scale, so quantization blocks look like a trained model's.
	free = -1
	// zero entries meet live values and must not change the function.
	zero = -2
)

// axis maps each index of an inflated matrix's rows or columns to the
// source's index, or to free or zero.
type axis []int

func newAxis(n, fill int) axis {
	a := make(axis, n)
	for i := range a {
		a[i] = fill
	}
	return a
}

// matrix is one inflated weight matrix: [len(rows) outputs, len(cols)
// inputs], GGUF dims {cols, rows}. Entry (r, c) is, by row then column:
// a zero row: 0; a free row: random; a source row: scale*src at a source
// column, random at a free column, 0 at a zero column. special, if set,
// then edits rows (the bias lane's few fixed entries).
type matrix struct {
	name       string
	typ        quant.Type
	rows, cols axis
	src        []float32 // source matrix, row-major [srcRows][srcCols]
	srcCols    int
	scale      float32
	pool       *randomPool
	special    func(r int, row []float32)
}

// add registers m with the writer; its bytes are made when the file is written.
func (m *matrix) add(ig *inflater) error {
	if m.pool == nil {
		return fmt.Errorf("%s: no random pool", m.name)
	}
	if !synthSupported(m.typ) {
		return fmt.Errorf("%s: cannot encode %v", m.name, m.typ)
	}
	if len(m.cols)%m.typ.BlockSize() != 0 {
		return fmt.Errorf("%s: rows of %d values are not whole %v blocks", m.name, len(m.cols), m.typ)
	}
	return ig.w.AddTensorFunc(m.name, m.typ, []int64{int64(len(m.cols)), int64(len(m.rows))}, m.write)
}

func synthSupported(t quant.Type) bool {
	switch t {
	case quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_K, quant.Q6_K:
		return true
	}
	return false
}

// rowsPerChunk rows are encoded by one worker at a time.
const rowsPerChunk = 32

// write encodes the rows in parallel chunks and writes them in order.
func (m *matrix) write(out io.Writer) error {
	rb, err := m.typ.RowBytes(int64(len(m.cols)))
	if err != nil {
		return fmt.Errorf("%s: %w", m.name, err)
	}
	workers := runtime.GOMAXPROCS(0)
	bufs := make([][]byte, workers)
	for i := range bufs {
		bufs[i] = make([]byte, rowsPerChunk*int(rb))
	}
	errs := make([]error, workers)
	n := len(m.rows)
	for start := 0; start < n; start += workers * rowsPerChunk {
		var wg sync.WaitGroup
		for w := range workers {
			lo := start + w*rowsPerChunk
			if lo >= n {
				break
			}
			hi := min(n, lo+rowsPerChunk)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[w] = m.encodeRows(lo, hi, bufs[w][:(hi-lo)*int(rb)], int(rb))
			}()
		}
		wg.Wait()
		for w := range workers {
			lo := start + w*rowsPerChunk
			if lo >= n {
				break
			}
			if errs[w] != nil {
				return errs[w]
			}
			hi := min(n, lo+rowsPerChunk)
			if _, err := out.Write(bufs[w][:(hi-lo)*int(rb)]); err != nil {
				return err
			}
		}
	}
	return nil
}

// encodeRows encodes rows [lo, hi) into dst.
func (m *matrix) encodeRows(lo, hi int, dst []byte, rb int) error {
	row := make([]float32, len(m.cols))
	for r := lo; r < hi; r++ {
		b := dst[(r-lo)*rb : (r-lo+1)*rb]
		switch code := m.rows[r]; {
		case code == zero && m.special == nil:
			clear(b) // zero bytes decode to zeros in every type written here
			continue
		case code == free && m.special == nil:
			copy(b, m.pool.row(m.typ, len(m.cols), r))
			continue
		case code == zero:
			clear(row)
		case code == free:
			// A random row with a few fixed entries (the head's padding
			// rows): the pooled row, re-encoded only in the blocks the
			// special entries change. Encoding 140k head rows whole would
			// take most of a Q4_K_M inflation's time.
			copy(b, m.pool.row(m.typ, len(m.cols), r))
			m.pool.codedFloats(row, r)
			orig := slices.Clone(row)
			m.special(r, row)
			bs, ts := m.typ.BlockSize(), m.typ.TypeSize()
			for k := 0; k < len(row); k += bs {
				if !slices.Equal(row[k:k+bs], orig[k:k+bs]) {
					if err := synth.Quantize(m.typ, row[k:k+bs], b[k/bs*ts:(k/bs+1)*ts]); err != nil {
						return fmt.Errorf("%s: row %d: %w", m.name, r, err)
					}
				}
			}
			continue
		default:
			m.pool.floats(row, r) // free columns keep these
			src := m.src[code*m.srcCols : (code+1)*m.srcCols]
			for c, sc := range m.cols {
				switch {
				case sc >= 0:
					row[c] = m.scale * src[sc]
				case sc == zero:
					row[c] = 0
				}
			}
		}
		if m.special != nil {
			m.special(r, row)
		}
		if err := synth.Quantize(m.typ, row, b); err != nil {
			return fmt.Errorf("%s: row %d: %w", m.name, r, err)
		}
	}
	return nil
}

// randomPool hands out random weights of one standard deviation: float
// rows cut from one long normal sequence at offsets that depend on the row,
// and, for rows that are random throughout, a few dozen of them encoded
// once per type and width and repeated in a shifted order. Writing
// gigabytes then costs little more than the disk, and the same seed makes
// the same file.
type randomPool struct {
	std    float32
	seq    []float32 // normal values, already scaled
	mu     sync.Mutex
	coded  map[[2]int][][]byte // (type, width) -> encoded rows
	offset uint64
}

// poolSeq values are cut into rows; codedRows rows of each (type, width)
// are encoded (prime, so repeats do not line up with head or block sizes).
const (
	poolSeq   = 1 << 20
	codedRows = 61
)

func newRandomPool(rng *rand.Rand, std float64) *randomPool {
	p := &randomPool{std: float32(std), seq: make([]float32, poolSeq), coded: map[[2]int][][]byte{}, offset: rng.Uint64()}
	for i := range p.seq {
		p.seq[i] = float32(rng.NormFloat64() * std)
	}
	return p
}

// floats fills dst with the random values of row r.
func (p *randomPool) floats(dst []float32, r int) {
	// A multiplicative hash spreads consecutive rows over the sequence.
	start := int((uint64(r)*0x9e3779b97f4a7c15 + p.offset) >> 44 % uint64(len(p.seq)))
	for i := 0; i < len(dst); {
		n := copy(dst[i:], p.seq[start:])
		i += n
		start = 0
	}
}

// codedFloats fills dst with the values row(t, len(dst), r) encodes.
func (p *randomPool) codedFloats(dst []float32, r int) {
	p.floats(dst, (r%codedRows)*7919)
}

// row is the encoded random row r of type t and width cols.
func (p *randomPool) row(t quant.Type, cols, r int) []byte {
	key := [2]int{int(t), cols}
	p.mu.Lock()
	rows, ok := p.coded[key]
	p.mu.Unlock()
	if !ok {
		rb, _ := t.RowBytes(int64(cols)) // checked by the caller's RowBytes
		rows = make([][]byte, codedRows)
		f := make([]float32, cols)
		for i := range rows {
			rows[i] = make([]byte, rb)
			p.codedFloats(f, i)
			// The writer checked the type; widths are whole blocks.
			_ = synth.Quantize(t, f, rows[i])
		}
		p.mu.Lock()
		p.coded[key] = rows
		p.mu.Unlock()
	}
	return rows[r%len(rows)]
}

// stdOf is the standard deviation of v (0 for fewer than two values).
func stdOf(v []float32) float64 {
	if len(v) < 2 {
		return 0
	}
	var s, s2 float64
	for _, x := range v {
		s += float64(x)
		s2 += float64(x) * float64(x)
	}
	n := float64(len(v))
	return math.Sqrt(max(0, s2/n-(s/n)*(s/n)))
}
