package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/hub"
	"github.com/tandem-run/tandem/engine/hub/hubtest"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// fakeHub serves the demo repositories (and one with no GGUF file) and
// points the Hub's environment variables at it, with an empty cache.
func fakeHub(t *testing.T) (*hubtest.Hub, string) {
	t.Helper()
	models := sharedtest.Path(t, "models")
	repos, err := hubtest.DemoRepos(models)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hubtest.New("hf_secret", append(repos, hubtest.Repo{ID: "tandem-demo/no-gguf"})...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	home := t.TempDir()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	return h, models
}

func run(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHubSearchAndFiles(t *testing.T) {
	fakeHub(t)
	code, out, errOut := run("hub", "search", "factory", "--sort", "likes")
	if code != 0 || !strings.Contains(out, "REPOSITORY") || strings.Index(out, hubtest.Eagle3Repo) > strings.Index(out, hubtest.DraftRepo) {
		t.Errorf("search: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = run("hub", "search", "factory", "--json", "--limit", "2")
	var repos []hub.Repo
	if err := json.Unmarshal([]byte(out), &repos); code != 0 || err != nil || len(repos) != 2 || repos[0].ID != hubtest.TargetRepo {
		t.Errorf("search --json: exit %d, %v, %+v", code, err, repos)
	}

	// Each file fits a device alone exactly when `tandem plan` on the local
	// copy, on that device alone, says it fits.
	const devs = "cuda0:64MiB,cuda0:128MiB"
	code, out, errOut = run("hub", "files", hubtest.TargetRepo, "--virtual-devices", devs, "--json")
	if code != 0 {
		t.Fatalf("files: exit %d: %s", code, errOut)
	}
	var listing struct {
		Models []hubModel `json:"models"`
	}
	if err := json.Unmarshal([]byte(out), &listing); err != nil || len(listing.Models) != 3 {
		t.Fatalf("files --json: %v\n%s", err, out)
	}
	models := sharedtest.Path(t, "models")
	var verdicts []string
	for _, m := range listing.Models {
		if m.HeaderBytes*4 > m.Size || len(m.Fits) != 3 {
			t.Errorf("%s: %d header bytes of %d, fits %+v", m.Name, m.HeaderBytes, m.Size, m.Fits)
		}
		for _, f := range m.Fits[:2] {
			code, _, _ := run("plan", "--model", filepath.Join(models, m.Name), "--virtual-devices", devs, "--target-devices", fmt.Sprint(f.Index))
			if f.Fits != (code == 0) {
				t.Errorf("%s on %s: fits %v, tandem plan exits %d", m.Name, f.Device, f.Fits, code)
			}
			verdicts = append(verdicts, fmt.Sprint(f.Fits))
		}
	}
	if !strings.Contains(strings.Join(verdicts, " "), "true") || !strings.Contains(strings.Join(verdicts, " "), "false") {
		t.Errorf("the devices do not tell the files apart: %v", verdicts)
	}
	code, out, _ = run("hub", "files", hubtest.TargetRepo, "--virtual-devices", devs)
	if code != 0 || !strings.Contains(out, "Q4_K_M") || !strings.Contains(out, "FITS") || !strings.Contains(out, "downloaded") {
		t.Errorf("files table: exit %d\n%s", code, out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"hub", "files", "tandem-demo/no-gguf"}, "no GGUF files"},
		{[]string{"hub", "files", "tandem-demo/missing"}, "repository not found"},
		{[]string{"pull", "tandem-demo/factory-draft-GGUF:Q3_K_S"}, "it has Q2_K"},
		{[]string{"pull", "tandem-demo/factory-draft-GGUF"}, "add a quantization"},
	} {
		code, _, errOut := run(tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q", tc.args, code, errOut)
		}
	}
}

// tandem plan on a Hub model reads its header remotely and prints the
// plan the local copy gives.
func TestPlanRemoteMatchesLocal(t *testing.T) {
	h, models := fakeHub(t)
	target := "hf://" + hubtest.TargetRepo + "/factory-target-Q4_K_M.gguf"
	draft := hubtest.Eagle3Repo + ":F16"
	localT, localD := filepath.Join(models, "factory-target-Q4_K_M.gguf"), filepath.Join(models, "factory-eagle3-F16.gguf")
	for _, extra := range [][]string{
		{"--virtual-devices", "cuda0:24MiB,cuda0:24MiB", "--split", "tensor"},
		{"--virtual-devices", "cuda0:12MiB", "--json"},
	} {
		code, remote, errOut := run(append([]string{"plan", "--model", target, "--draft", draft}, extra...)...)
		codeL, local, _ := run(append([]string{"plan", "--model", localT, "--draft", localD}, extra...)...)
		if code != codeL || code == 1 {
			t.Fatalf("%v: exit %d, local %d: %s", extra, code, codeL, errOut)
		}
		remote = strings.NewReplacer(target, localT, hub.Scheme+hubtest.Eagle3Repo+"/factory-eagle3-F16.gguf", localD).Replace(remote)
		if remote != local {
			t.Errorf("%v: remote plan\n%s\nlocal plan\n%s", extra, remote, local)
		}
	}
	size := int64(0)
	for _, n := range []string{"factory-target-Q4_K_M.gguf", "factory-eagle3-F16.gguf"} {
		st, _ := os.Stat(filepath.Join(models, n))
		size += st.Size()
	}
	t.Logf("two plans of the pair read %d bytes of the Hub's files (the pair is %d bytes)", h.Served(), size)
	if h.Served() > size/4 {
		t.Errorf("plans read %d bytes of %d", h.Served(), size)
	}
	// info and tokenize take Hub models the same way.
	if code, out, errOut := run("info", target); code != 0 || !strings.Contains(out, "qwen3") {
		t.Errorf("info: exit %d %s%s", code, out, errOut)
	}
	if code, out, errOut := run("tokenize", "--model", draft, "--text", "In the beginning"); code != 0 || out == "" {
		t.Errorf("tokenize: exit %d %s%s", code, out, errOut)
	}
}

func TestPullThenRunOffline(t *testing.T) {
	fakeHub(t)
	target := hubtest.TargetRepo + ":Q4_K_M"
	gen := []string{"run", "--model", target, "--prompt", "<|im_start|>user\nQuote Genesis 1:3.<|im_end|>\n<|im_start|>assistant\n", "-n", "4", "--json"}
	code, _, errOut := run(gen...)
	if code != 1 || !strings.Contains(errOut, "tandem pull hf://"+target) || !strings.Contains(errOut, "--pull") {
		t.Errorf("run before pulling: exit %d, %q", code, errOut)
	}
	code, out, errOut := run("pull", target)
	path := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(path, filepath.Join(os.Getenv("HF_HOME"), "hub", "models--tandem-demo--factory-target-GGUF", "snapshots")) ||
		!strings.Contains(errOut, "100%") {
		t.Fatalf("pull: exit %d, %q, %q", code, out, errOut)
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	code, out, errOut = run(gen...)
	var res runResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.GeneratedTokens != 4 {
		t.Errorf("offline run of the pulled model: exit %d, %v: %s", code, err, errOut)
	}
	code, _, errOut = run("hub", "search", "factory")
	if code != 1 || !strings.Contains(errOut, "HF_HUB_OFFLINE") {
		t.Errorf("offline search: exit %d, %q", code, errOut)
	}
	code, _, errOut = run("run", "--model", hubtest.DraftRepo+":Q8_0", "--pull", "--prompt", "x", "-n", "1")
	if code != 1 || !strings.Contains(errOut, "not downloaded yet") || !strings.Contains(errOut, "offline") {
		t.Errorf("offline, not cached, --pull: exit %d, %q", code, errOut)
	}
}
