package app

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestModelOrDemo(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var errOut bytes.Buffer
	target, draft, err := modelOrDemo("", "", true, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{target, draft} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("demo model %s: %v", p, err)
		}
	}
	if !strings.Contains(errOut.String(), "demo pair") {
		t.Errorf("stderr does not mention the demo pair: %q", errOut.String())
	}

	errOut.Reset()
	target, draft, err = modelOrDemo("", "/my/draft.gguf", true, &errOut)
	if err != nil || draft != "/my/draft.gguf" || !strings.Contains(errOut.String(), "demo target") {
		t.Errorf("demo target with own draft: %q %q %v %q", target, draft, err, errOut.String())
	}

	errOut.Reset()
	target, draft, err = modelOrDemo("/m.gguf", "", true, &errOut)
	if err != nil || target != "/m.gguf" || draft != "" || errOut.Len() != 0 {
		t.Errorf("explicit model: %q %q %v %q", target, draft, err, errOut.String())
	}
}
