package grammar

import "unicode/utf8"

// byteRange is a closed range of byte values.
type byteRange struct{ lo, hi byte }

// utf8Sequences appends to dst the byte-range sequences whose
// concatenations are exactly the UTF-8 encodings of the code points in
// [lo, hi] (no surrogates). Each sequence holds the encodings of one
// sub-range whose code points share every byte but the ranges: the range is
// split at encoding-length boundaries and then wherever a continuation
// byte would not run over its full 0x80-0xBF span.
func utf8Sequences(dst [][]byteRange, lo, hi rune) [][]byteRange {
	for _, edge := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= edge && hi > edge {
			dst = utf8Sequences(dst, lo, edge)
			return utf8Sequences(dst, edge+1, hi)
		}
	}
	n := utf8.RuneLen(lo)
	if n == 1 {
		return append(dst, []byteRange{{byte(lo), byte(hi)}})
	}
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1 // the low bits the last i bytes hold
		if lo&^m == hi&^m {
			continue
		}
		if lo&m != 0 {
			dst = utf8Sequences(dst, lo, lo|m)
			return utf8Sequences(dst, (lo|m)+1, hi)
		}
		if hi&m != m {
			dst = utf8Sequences(dst, lo, hi&^m-1)
			return utf8Sequences(dst, hi&^m, hi)
		}
	}
	var a, b [utf8.UTFMax]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	seq := make([]byteRange, n)
	for i := range seq {
		seq[i] = byteRange{a[i], b[i]}
	}
	return append(dst, seq)
}
