package cuda

import (
	"fmt"
	"sync"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
)

// ScratchOwner is the owner of the workspace in Usage: the backend's, shared
// by whatever models use it.
const ScratchOwner = "workspace"

// sharedScratch is the backend's workspace: one buffer holding a region of
// each kind (workspace.Region) for every program compiled on the backend.
// Its generation changes whenever the buffer does, which tells programs
// compiled against an older one to compile again.
type sharedScratch struct {
	mu    sync.Mutex
	buf   kernels.Buffer
	ptr   devicePtr
	sizes workspace.Sizes
	gen   int
}

// Reserve grows the workspace to at least s: a memory plan's figure for
// the device (workspace.For of the models' shapes), reserved at load so the
// programs compiled later fit in it and none grows it mid-generation.
func (be *Backend) Reserve(s workspace.Sizes) error {
	_, _, _, err := be.growScratch(s)
	return err
}

// growScratch returns the workspace's address, layout and generation,
// first growing it to hold need.
func (be *Backend) growScratch(need workspace.Sizes) (devicePtr, workspace.Sizes, int, error) {
	ws := &be.scratch
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.sizes.Covers(need) {
		return ws.ptr, ws.sizes, ws.gen, nil
	}
	grown := ws.sizes.Max(need)
	if ws.buf != nil {
		// Runs queued before may still use the old buffer. Freed before the
		// new one is taken, so a capped device needs room for one only.
		if err := be.Sync(); err != nil {
			return 0, workspace.Sizes{}, 0, err
		}
		if err := be.Free(ws.buf); err != nil {
			return 0, workspace.Sizes{}, 0, err
		}
		ws.buf, ws.ptr, ws.sizes = nil, 0, workspace.Sizes{}
		ws.gen++
	}
	// Alloc zeroes: the attention counters start at zero.
	// Never from a model's slab: the workspace outlives models.
	b, err := be.allocZeroed(kernels.Label{Owner: ScratchOwner, Cat: kernels.Scratch}, grown.Total(), false)
	if err != nil {
		return 0, workspace.Sizes{}, 0, fmt.Errorf("cuda: workspace: %w", err)
	}
	ws.buf, ws.ptr, ws.sizes = b, b.(*buffer).ptr, grown
	ws.gen++
	return ws.ptr, ws.sizes, ws.gen, nil
}

// scratchGen is the workspace's generation.
func (be *Backend) scratchGen() int {
	be.scratch.mu.Lock()
	defer be.scratch.mu.Unlock()
	return be.scratch.gen
}
