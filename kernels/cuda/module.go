package cuda

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

//go:generate sh gen.sh

// ptxFiles are the kernels, compiled from src/*.cu by gen.sh.
//
//go:embed ptx
var ptxFiles embed.FS

// dependentPTX holds the kernels for sm_90 and later, built to be launched
// with programmatic dependent launch (gen.sh).
const dependentPTX = "ptx/sm90"

// hasDir reports whether fsys has the directory dir.
func hasDir(fsys fs.FS, dir string) bool {
	st, err := fs.Stat(fsys, dir)
	return err == nil && st.IsDir()
}

// loadModules JIT-compiles every PTX file in the directory dir of fsys
// (ptx or ptx/sm90) and indexes its kernels by name. Runs on the device
// thread.
func (be *Backend) loadModules(fsys fs.FS, dir string) error {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return fmt.Errorf("cuda: embedded kernels: %w", err)
	}
	be.funcs = make(map[string]cuFunction)
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".ptx") {
			continue
		}
		src, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("cuda: embedded kernels: %w", err)
		}
		m, err := be.drv.moduleLoad(src)
		if err != nil {
			return fmt.Errorf("cuda: %s: %w", e.Name(), err)
		}
		be.modules = append(be.modules, m)
		for _, name := range ptxEntries(src) {
			f, err := be.drv.moduleFunction(m, name)
			if err != nil {
				return err
			}
			be.funcs[name] = f
		}
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

// function is a kernel by name; a name missing from the PTX is a build
// error of this package, reported rather than crashed on.
func (be *Backend) function(name string) (cuFunction, error) {
	f, ok := be.funcs[name]
	if !ok {
		return 0, fmt.Errorf("cuda: kernel %s not in the embedded PTX (run go generate)", name)
	}
	return f, nil
}
