package gguf

// Get returns the metadata value under key.
func (f *File) Get(key string) (any, bool) {
	i, ok := f.index[key]
	if !ok {
		return nil, false
	}
	return f.KV[i].Value, true
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	v, _ := f.Get(key)
	s, ok := v.(string)
	return s, ok
}

// Int returns any integer value as int64.
func (f *File) Int(key string) (int64, bool) {
	v, _ := f.Get(key)
	return asInt64(v)
}

// Uint returns any non-negative integer value as uint64.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	if u, ok := v.(uint64); ok {
		return u, true
	}
	i, ok := asInt64(v)
	if !ok || i < 0 {
		return 0, false
	}
	return uint64(i), true
}

// Float returns any numeric value as float64.
func (f *File) Float(key string) (float64, bool) {
	v, _ := f.Get(key)
	return asFloat64(v)
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	v, _ := f.Get(key)
	b, ok := v.(bool)
	return b, ok
}

// Strings returns a string array.
func (f *File) Strings(key string) ([]string, bool) {
	v, _ := f.Get(key)
	a, ok := v.(Array)
	if !ok {
		return nil, false
	}
	s, ok := a.Values.([]string)
	return s, ok
}

// Int32s returns any integer array converted to int32; values out of the
// int32 range make it fail.
func (f *File) Int32s(key string) ([]int32, bool) {
	v, _ := f.Get(key)
	a, ok := v.(Array)
	if !ok {
		return nil, false
	}
	if s, ok := a.Values.([]int32); ok {
		return s, true
	}
	out := make([]int32, 0, a.Len())
	ok = eachInt(a.Values, func(x int64) bool {
		if x < -1<<31 || x > 1<<31-1 {
			return false
		}
		out = append(out, int32(x))
		return true
	})
	return out, ok
}

// Float32s returns a float32 array (float64 arrays are converted).
func (f *File) Float32s(key string) ([]float32, bool) {
	v, _ := f.Get(key)
	a, ok := v.(Array)
	if !ok {
		return nil, false
	}
	switch s := a.Values.(type) {
	case []float32:
		return s, true
	case []float64:
		out := make([]float32, len(s))
		for i, x := range s {
			out[i] = float32(x)
		}
		return out, true
	}
	return nil, false
}

// eachInt calls fn on every element of an integer slice; false if the slice
// is not of an integer type or fn refuses an element.
func eachInt(values any, fn func(int64) bool) bool {
	switch s := values.(type) {
	case []uint8:
		for _, x := range s {
			if !fn(int64(x)) {
				return false
			}
		}
	case []int8:
		for _, x := range s {
			if !fn(int64(x)) {
				return false
			}
		}
	case []uint16:
		for _, x := range s {
			if !fn(int64(x)) {
				return false
			}
		}
	case []int16:
		for _, x := range s {
			if !fn(int64(x)) {
				return false
			}
		}
	case []uint32:
		for _, x := range s {
			if !fn(int64(x)) {
				return false
			}
		}
	case []int64:
		for _, x := range s {
			if !fn(x) {
				return false
			}
		}
	case []uint64:
		for _, x := range s {
			if x > 1<<63-1 || !fn(int64(x)) {
				return false
			}
		}
	default:
		return false
	}
	return true
}

// Arch is general.architecture ("llama", "qwen3", "eagle3", ...).
func (f *File) Arch() string {
	s, _ := f.String("general.architecture")
	return s
}

// ArchUint reads ARCH.suffix as an unsigned integer, e.g. ArchUint("block_count").
func (f *File) ArchUint(suffix string) (uint64, bool) {
	return f.Uint(f.Arch() + "." + suffix)
}

// ArchFloat reads ARCH.suffix as a number, e.g. ArchFloat("rope.freq_base").
func (f *File) ArchFloat(suffix string) (float64, bool) {
	return f.Float(f.Arch() + "." + suffix)
}
