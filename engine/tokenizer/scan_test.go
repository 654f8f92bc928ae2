package tokenizer

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// scanPatterns are the patterns with hand-written scanners.
var scanPatterns = []string{patGPT2, patLlama3, patQwen2}

func pieces(t testing.TB, st stage, s string) []string {
	t.Helper()
	var out []string
	if err := st(s, func(p string) { out = append(out, p) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkScanners fails if any scanner splits s differently from regexp2
// running the pattern it stands for.
func checkScanners(t testing.TB, regex []stage, s string) {
	t.Helper()
	for i, pat := range scanPatterns {
		want := pieces(t, regex[i], s)
		got := pieces(t, scannerStage(pat), s)
		if !slices.Equal(got, want) {
			t.Fatalf("pattern %q on %q:\nscanner %q\nregexp2 %q", pat, s, got, want)
		}
	}
}

func regexStages(t testing.TB) []stage {
	t.Helper()
	var out []stage
	for _, pat := range scanPatterns {
		st, err := regexStage(pat)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, st)
	}
	return out
}

// TestScannersMatchRegexOnReference runs every reference string through both.
func TestScannersMatchRegexOnReference(t *testing.T) {
	regex := regexStages(t)
	o, _ := loadOracle(t)
	texts := o.Strings
	vecs, _ := filepath.Glob(sharedtest.Path(t, "testdata", "vocab", "ggml-vocab-*.gguf"))
	for _, path := range vecs {
		inp, _ := readVectors(t, path)
		texts = append(texts, inp...)
	}
	for _, s := range texts {
		checkScanners(t, regex, s)
	}
}

// scanAlphabet mixes the characters the patterns treat differently: ASCII and
// other letters, digits of several kinds, every flavour of whitespace, the
// apostrophe and contraction letters, punctuation, marks, emoji.
var scanAlphabet = []rune("aZsStTrReEvVmMlLdD'''' \t\n\r\v\f\u00a0\u0085\u2003\u3000\u2028" +
	"0179٣²½Ⅷ.,!?-_\"()[]{}<>/\\@#$%^&*+=`~|;:éÉßſΩЖ中あ한\u0301\u200b\u200d😀🦙")

func randomText(rng *rand.Rand, n int) string {
	var sb strings.Builder
	for range n {
		sb.WriteRune(scanAlphabet[rng.IntN(len(scanAlphabet))])
	}
	return sb.String()
}

func TestScannersMatchRegexOnRandomText(t *testing.T) {
	regex := regexStages(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		checkScanners(t, regex, randomText(rng, 1+rng.IntN(40)))
	}
}

func FuzzScanners(f *testing.F) {
	for _, s := range []string{"", "I've 'S 'LL", "  \n\t x", "a\r\n\r\n  b", "١٢٣٤ 12345", "é\u0301 ſ"} {
		f.Add(s)
	}
	regex := regexStages(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !strings.ContainsRune(s, 0xFFFD) && strings.ToValidUTF8(s, "") == s {
			checkScanners(t, regex, s)
		}
	})
}
