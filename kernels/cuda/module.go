package cuda

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
)

//go:generate sh gen.sh

// ptxFiles are the kernels, compiled from src/*.cu by gen.sh.
//
//go:embed ptx
var ptxFiles embed.FS

// dependentPTX holds the kernels for sm_90 and later, built to be launched
// with programmatic dependent launch (gen.sh).
const dependentPTX = "ptx/sm90"

// archPTX holds kernels for compute capability 9.0 alone (sm_90a: wgmma),
// beside those of ptx or ptx/sm90 (gen.sh).
const archPTX = "ptx/sm90a"

// hasDir reports whether fsys has the directory dir.
func hasDir(fsys fs.FS, dir string) bool {
	st, err := fs.Stat(fsys, dir)
	return err == nil && st.IsDir()
}

// lazyModules are the PTX files loaded on the first use of one of their
// kernels rather than at Open: the attention over quantized or mixed KV
// caches (attention_kv.ptx, 28 kernels) takes the driver seconds to
// JIT-compile, which a model with an F16 cache should not pay.
// The mixture-of-experts kernels (moe.ptx, a route and two products for
// every weight type) likewise wait for a model that has experts.
var lazyModules = map[string]bool{"attention_kv.ptx": true, "moe.ptx": true}

// kernelIndex is the backend's kernels by name: those of loaded modules,
// and for the lazy ones not loaded yet, the module's file.
type kernelIndex struct {
	mu    sync.Mutex
	funcs map[string]cuFunction
	lazy  map[string]lazyModule
	// shared is the dynamic shared memory each kernel was allowed above
	// the 48 KiB every kernel may take without asking
	shared map[cuFunction]uint32
}

type lazyModule struct {
	file string
	src  []byte
}

// loadModules JIT-compiles every PTX file in the directory dir of fsys
// (ptx or ptx/sm90) but the lazy ones, and indexes the kernels of all by
// name. Runs on the device thread.
func (be *Backend) loadModules(fsys fs.FS, dir string) error {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return fmt.Errorf("cuda: embedded kernels: %w", err)
	}
	be.kernels.funcs = make(map[string]cuFunction)
	be.kernels.lazy = make(map[string]lazyModule)
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".ptx") {
			continue
		}
		src, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("cuda: embedded kernels: %w", err)
		}
		if lazyModules[e.Name()] {
			for _, name := range ptxEntries(src) {
				be.kernels.lazy[name] = lazyModule{e.Name(), src}
			}
			continue
		}
		if err := be.loadModule(e.Name(), src); err != nil {
			return err
		}
	}
	return nil
}

// loadArchModules adds the kernels of archPTX on a GPU of compute
// capability 9.0 exactly (sm_90a PTX loads nowhere else). They are extras:
// a driver too old for their PTX ISA (8.0, CUDA 12) fails to load them,
// and the backend then runs the kernels every GPU has, as it does on other
// GPUs; so such a failure is not an error of Open. Device thread only.
func (be *Backend) loadArchModules(fsys fs.FS) {
	if be.info.ComputeMajor != 9 || be.info.ComputeMinor != 0 || !hasDir(fsys, archPTX) {
		return
	}
	entries, err := fs.ReadDir(fsys, archPTX)
	if err != nil {
		return
	}
	loaded := true
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".ptx") {
			continue
		}
		src, err := fs.ReadFile(fsys, path.Join(archPTX, e.Name()))
		if err != nil || be.loadModule(e.Name(), src) != nil {
			loaded = false
		}
	}
	be.wgmma = loaded && be.kernels.funcs["mmtw_f16_4"] != 0
}

// loadModule JIT-compiles one PTX file and indexes its kernels; device
// thread only.
func (be *Backend) loadModule(file string, src []byte) error {
	m, err := be.drv.moduleLoad(src)
	if err != nil {
		return fmt.Errorf("cuda: %s: %w", file, err)
	}
	be.modules = append(be.modules, m)
	for _, name := range ptxEntries(src) {
		f, err := be.drv.moduleFunction(m, name)
		if err != nil {
			return err
		}
		be.kernels.funcs[name] = f
		delete(be.kernels.lazy, name)
	}
	return nil
}

// ptxEntries lists the kernel names a PTX file defines (".entry NAME(").
func ptxEntries(src []byte) []string {
	var names []string
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		i := strings.Index(line, ".entry ")
		if i < 0 {
			continue
		}
		name := strings.TrimSpace(line[i+len(".entry "):])
		if j := strings.IndexAny(name, "( "); j >= 0 {
			name = name[:j]
		}
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}

// function is a kernel by name, its module loaded first if it is a lazy
// one; a name missing from the PTX is a build error of this package,
// reported rather than crashed on. Not for the device thread (a lazy load
// runs there).
func (be *Backend) function(name string) (cuFunction, error) {
	k := &be.kernels
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok := k.funcs[name]; ok {
		return f, nil
	}
	lm, ok := k.lazy[name]
	if !ok {
		return 0, fmt.Errorf("cuda: kernel %s not in the embedded PTX (run go generate)", name)
	}
	if err := be.do(func() error { return be.loadModule(lm.file, lm.src) }); err != nil {
		return 0, err
	}
	return k.funcs[name], nil
}

// functionShared is function(name) allowed bytes of dynamic shared memory:
// above 48 KiB a kernel must ask for it (cuFuncSetAttribute), up to the
// device's DeviceInfo.SharedOptin. Not for the device thread.
func (be *Backend) functionShared(name string, bytes uint32) (cuFunction, error) {
	f, err := be.function(name)
	if err != nil || bytes <= 48<<10 {
		return f, err
	}
	if int(bytes) > be.info.SharedOptin {
		return 0, fmt.Errorf("cuda: kernel %s: %d bytes of shared memory, the device allows %d", name, bytes, be.info.SharedOptin)
	}
	k := &be.kernels
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.shared[f] >= bytes {
		return f, nil
	}
	if err := be.do(func() error { return be.drv.funcSetAttribute(f, funcMaxDynamicShared, int(bytes)) }); err != nil {
		return 0, fmt.Errorf("cuda: kernel %s: %w", name, err)
	}
	if k.shared == nil {
		k.shared = make(map[cuFunction]uint32)
	}
	k.shared[f] = bytes
	return f, nil
}
