package hub

import (
	"errors"
	"io"
)

// limitedReader fails, rather than stops, past n bytes, so an oversized
// answer is an error and not silently cut JSON.
type limitedReader struct {
	r io.Reader
	n int64
}

var errTooLarge = errors.New("answer too large")

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}
