package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// scannerStage returns a hand-written splitter for the patterns nearly every
// model uses, or nil. Each is a direct transcription of its pattern's
// alternation, tried in order at every position; scan_test.go checks them
// against regexp2 on the reference strings and on random text.
func scannerStage(pattern string) stage {
	switch pattern {
	case patGPT2:
		return func(s string, emit func(string)) error { return scan(s, emit, matchGPT2) }
	case patLlama3:
		return func(s string, emit func(string)) error {
			return scan(s, emit, func(s string, i int) int { return matchLlama3(s, i, 3) })
		}
	case patQwen2:
		return func(s string, emit func(string)) error {
			return scan(s, emit, func(s string, i int) int { return matchLlama3(s, i, 1) })
		}
	}
	return nil
}

// scan emits consecutive matches; match returns the byte length of the match
// at i, which these patterns make at least one rune long at every position.
func scan(s string, emit func(string), match func(s string, i int) int) error {
	for i := 0; i < len(s); {
		n := match(s, i)
		emit(s[i : i+n])
		i += n
	}
	return nil
}

// Character classes of the patterns: \p{L}, \p{N}, \s (with \r and \n apart)
// and everything else.
type class uint8

const (
	classOther class = iota
	classLetter
	classNumber
	classSpace
	classNewline // \r or \n (also in \s)
)

// asciiClass is the class of each ASCII byte, the common case.
var asciiClass = func() (t [utf8.RuneSelf]class) {
	for b := range t {
		switch r := rune(b); {
		case r == '\r' || r == '\n':
			t[b] = classNewline
		case r == ' ' || r == '\t' || r == '\v' || r == '\f':
			t[b] = classSpace
		case unicode.IsLetter(r):
			t[b] = classLetter
		case unicode.IsNumber(r):
			t[b] = classNumber
		}
	}
	return t
}()

// classOf classifies r. \s here is Unicode White_Space plus U+0085, the same
// set as regexp2's \s ([\f\n\r\t\v\x85\p{Z}]).
func classOf(r rune) class {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.IsSpace(r):
		return classSpace
	}
	return classOther
}

// at returns the rune at i, its width and class; at the end it returns width 0.
func at(s string, i int) (rune, int, class) {
	if i >= len(s) {
		return 0, 0, classOther
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return r, w, classOf(r)
}

// run returns the byte length of the longest run of runes from i whose class
// satisfies in.
func run(s string, i int, in func(class) bool) int {
	j := i
	for j < len(s) {
		_, w, c := at(s, j)
		if !in(c) {
			break
		}
		j += w
	}
	return j - i
}

func isLetter(c class) bool { return c == classLetter }
func isNumber(c class) bool { return c == classNumber }
func isOther(c class) bool  { return c == classOther }
func isSpace(c class) bool  { return c == classSpace || c == classNewline }
func isNewline(c class) bool {
	return c == classNewline
}

// contraction returns the length of 's 't 're 've 'm 'll 'd at i (s[i] is the
// apostrophe), or 0; fold makes the letters case-insensitive, where Unicode
// case folding also lets the long s (ſ) stand for s.
func contraction(s string, i int, fold bool) int {
	if fold && strings.HasPrefix(s[i+1:], "ſ") {
		return 1 + len("ſ")
	}
	lower := func(j int) byte {
		if j >= len(s) {
			return 0
		}
		c := s[j]
		if fold && c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		return c
	}
	switch c := lower(i + 1); c {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if lower(i+2) == 'e' {
			return 3
		}
	case 'l':
		if lower(i+2) == 'l' {
			return 3
		}
	}
	return 0
}

// whitespace matches the pattern tails shared by both scanners at a
// whitespace rune: \s+(?!\S)|\s+ (a run followed by a non-space gives up its
// last rune to the next piece, unless that would leave it empty).
func whitespace(s string, i int) int {
	n := run(s, i, isSpace)
	if i+n == len(s) {
		return n
	}
	_, last := utf8.DecodeLastRuneInString(s[i : i+n])
	if n > last {
		return n - last
	}
	return n
}

// matchGPT2 matches patGPT2 at i:
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func matchGPT2(s string, i int) int {
	r, w, c := at(s, i)
	if r == '\'' {
		if n := contraction(s, i, false); n > 0 {
			return n
		}
	}
	j, cj := i, c
	if r == ' ' {
		if _, w2, c2 := at(s, i+w); w2 > 0 && !isSpace(c2) {
			j, cj = i+w, c2
		}
	}
	switch {
	case isLetter(cj):
		return j - i + run(s, j, isLetter)
	case isNumber(cj):
		return j - i + run(s, j, isNumber)
	case isOther(cj):
		return j - i + run(s, j, isOther)
	}
	return whitespace(s, i)
}

// matchLlama3 matches patLlama3 (maxDigits 3) or patQwen2 (maxDigits 1) at i:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
// | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func matchLlama3(s string, i, maxDigits int) int {
	r, w, c := at(s, i)
	if r == '\'' {
		if n := contraction(s, i, true); n > 0 {
			return n
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == classLetter {
		return w + run(s, i+w, isLetter)
	}
	if c == classOther || c == classSpace {
		if n := run(s, i+w, isLetter); n > 0 {
			return w + n
		}
	}
	// \p{N}{1,maxDigits}
	if c == classNumber {
		j := i + w
		for k := 1; k < maxDigits; k++ {
			_, w2, c2 := at(s, j)
			if c2 != classNumber || w2 == 0 {
				break
			}
			j += w2
		}
		return j - i
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	j := i
	if r == ' ' {
		j += w
	}
	if n := run(s, j, isOther); n > 0 {
		j += n
		return j - i + run(s, j, isNewline)
	}
	// \s*[\r\n]+: up to and including the run's last newline.
	n := run(s, i, isSpace)
	for k := i + n - 1; k >= i; k-- {
		if s[k] == '\r' || s[k] == '\n' {
			return k + 1 - i
		}
	}
	return whitespace(s, i)
}
