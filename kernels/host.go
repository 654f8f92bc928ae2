package kernels

import "unsafe"

// F32Bytes views a float32 slice as its bytes (host byte order), for Write
// and Read without a copy.
func F32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// I32Bytes views an int32 slice as its bytes (host byte order).
func I32Bytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}
