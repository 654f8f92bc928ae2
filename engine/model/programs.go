package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/tandem-run/tandem/kernels"
)

// progKey names one compiled program of a backend.
type progKey struct {
	kind  progKind
	block int     // the block a program starts at; the head's headKind
	n     int     // rows
	top   int     // a top-k head's k
	inv   float32 // a softmax head's inverse temperature (headProbs)
	// seqs is the sequences' slots and rows of a pass over several
	// (Model.ForwardSeqs), whose attention each reads its own slot; ""
	// for one sequence in slot 0.
	seqs string
	// bare is a program compiled while the capture is paused, without
	// its copies (Model.PauseCapture).
	bare bool
}

type progKind uint8

const (
	progEmbed    progKind = iota // token lookup
	progStage                    // layer split: the part's blocks (from one captured block to the next)
	progAttn                     // tensor split: a block's attention, partial output
	progFFN                      // tensor split: a block's FFN, partial output
	progFinish                   // tensor split: the last block's sum into the stream
	progReduce                   // tensor split: a share added to the sum received
	progReduced                  // tensor split with a reduce group: a run of blocks, the shares summed on the devices
	progHead                     // output norm and the part's head rows, and what headKind adds
	progFuse                     // EAGLE-3: the target's states into the fused ones
	progDraft                    // EAGLE-3: the layer on fused states, and the head
	progStep                     // EAGLE-3: the layer on its own last output, and the head
	progFarHead                  // EAGLE-3: its rows of the target's head, where the target keeps them
	progChain                    // greedy drafting: steps 2..k, each on the last one's argmax (chain.go)
	progExperts                  // experts apart (experts.go): a block's routed experts on the expert device
	progResidual                 // experts apart: the experts' output added to the block's stream
)

// maxPrograms bounds each backend's program cache by shapes of rows;
// prompts of many lengths, and passes over changing sets of sequences,
// would otherwise keep one compiled program each.
const maxPrograms = 16

// programs are one backend's compiled programs, compiled on first use and
// kept (a GPU backend captures each as a graph on its first run).
type programs struct {
	be    kernels.Backend
	where string // the device, in messages
	m     map[progKey]kernels.Program
	used  map[shape]uint64 // when each shape last ran, in runs
	runs  uint64
	bare  bool // the capture is paused: run and compile bare programs
}

func newPrograms(be kernels.Backend, where string) programs {
	return programs{be: be, where: where, m: map[progKey]kernels.Program{}, used: map[shape]uint64{}}
}

// run runs the program of key, compiling it with ops on first use.
func (p *programs) run(ctx context.Context, key progKey, ops func() []kernels.Op) error {
	prog, err := p.get(key, ops)
	if err != nil || prog == nil {
		return err
	}
	p.touch(key)
	if err := prog.Run(ctx); err != nil {
		return fmt.Errorf("model: %s: %w", p.where, err)
	}
	return nil
}

// touch counts a run of key's shape, which evict keeps the longer the
// later it ran.
func (p *programs) touch(key progKey) {
	p.runs++
	p.used[shape{key.n, key.seqs}] = p.runs
}

// get returns the program of key, compiling it with ops on first use; nil
// when ops are none.
func (p *programs) get(key progKey, ops func() []kernels.Op) (kernels.Program, error) {
	key.bare = p.bare
	prog, ok := p.m[key]
	if !ok {
		list := ops()
		if len(list) == 0 {
			return nil, nil
		}
		var err error
		if prog, err = p.be.Compile(list); err != nil {
			return nil, fmt.Errorf("model: %s: compile for %d rows: %w", p.where, key.n, err)
		}
		p.evict(key)
		p.m[key] = prog
	}
	return prog, nil
}

// shape is what a program's rows are: their number and, in a pass over
// several sequences, their slots.
type shape struct {
	n    int
	seqs string
}

// evict bounds the cache: when maxPrograms shapes of rows are cached, the
// programs of the shape run least recently, other than one row of one
// sequence (decode) and key's, go.
func (p *programs) evict(key progKey) {
	shapes := map[shape]bool{}
	for k := range p.m {
		shapes[shape{k.n, k.seqs}] = true
	}
	if len(shapes) < maxPrograms {
		return
	}
	var old shape
	found := false
	for sh := range shapes {
		if sh == (shape{1, ""}) || sh == (shape{key.n, key.seqs}) {
			continue
		}
		if !found || p.used[sh] < p.used[old] {
			old, found = sh, true
		}
	}
	if !found {
		return
	}
	for k, prog := range p.m {
		if k.n == old.n && k.seqs == old.seqs {
			_ = prog.Close()
			delete(p.m, k)
		}
	}
	delete(p.used, old)
}

// drop releases the programs whose keys match.
func (p *programs) drop(match func(progKey) bool) {
	for k, prog := range p.m {
		if match(k) {
			_ = prog.Close()
			delete(p.m, k)
		}
	}
}

// close releases every program.
func (p *programs) close() error {
	var errs []error
	for k, prog := range p.m {
		errs = append(errs, prog.Close())
		delete(p.m, k)
	}
	return errors.Join(errs...)
}
