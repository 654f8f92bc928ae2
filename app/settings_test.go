package app

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// testClock is a clock that ticks one second per call.
func testClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
}

func newTestStore(t *testing.T) *store {
	t.Helper()
	s, err := openStore(t.TempDir(), testClock())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSettingsRoundTrip(t *testing.T) {
	s := newTestStore(t)
	set, note, err := s.loadSettings()
	if err != nil || note != "" {
		t.Fatalf("first start: note %q, err %v", note, err)
	}
	if set.Version != settingsVersion || set.Chat.MaxTokens == 0 {
		t.Fatalf("first start did not give defaults: %+v", set)
	}
	set.Target = "/models/a.gguf"
	set.Layout.TargetDevices = []int{1, 0}
	set.Chat.Temperature = 0.7
	if err := s.saveSettings(set); err != nil {
		t.Fatal(err)
	}
	got, note, err := s.loadSettings()
	if err != nil || note != "" {
		t.Fatalf("reload: note %q, err %v", note, err)
	}
	if got.Target != set.Target || got.Chat.Temperature != 0.7 || len(got.Layout.TargetDevices) != 2 {
		t.Errorf("reloaded %+v, want %+v", got, set)
	}
}

// A corrupt or newer settings file is renamed, never deleted, and the app
// starts with defaults and a note.
func TestSettingsKeptAside(t *testing.T) {
	for name, content := range map[string]string{
		"corrupt":    `{"version": 1, "target": `,
		"newer":      `{"version": 99, "target": "x"}`,
		"no version": `{"target": "x"}`,
		"wrong type": `{"version": 1, "target": 5}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := newTestStore(t)
			path := filepath.Join(s.dir, settingsFile)
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			set, note, err := s.loadSettings()
			if err != nil {
				t.Fatal(err)
			}
			if set.Target != "" || set.Version != settingsVersion {
				t.Errorf("got %+v, want defaults", set)
			}
			if !strings.Contains(note, "default settings") {
				t.Errorf("note %q does not say the defaults are used", note)
			}
			aside, _ := filepath.Glob(path + ".*")
			if len(aside) != 1 {
				t.Fatalf("kept aside: %v, want one file", aside)
			}
			if b, _ := os.ReadFile(aside[0]); string(b) != content {
				t.Errorf("kept-aside file holds %q, want the original", b)
			}
			if !strings.Contains(note, aside[0]) {
				t.Errorf("note %q does not name %s", note, aside[0])
			}
			if name == "newer" && !strings.Contains(aside[0], ".newer-") {
				t.Errorf("newer file kept as %s", aside[0])
			}
			// The next start is clean.
			if _, note, _ := s.loadSettings(); note != "" {
				t.Errorf("second start: note %q", note)
			}
		})
	}
}

// Two windows saving at once: each one's recent files survive.
func TestSettingsConcurrentSavesMergeRecent(t *testing.T) {
	s := newTestStore(t)
	other := &store{dir: s.dir, now: testClock()}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for i, st := range []*store{s, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			set := defaultSettings()
			for j := range 5 {
				set.Recent = addRecent(set.Recent, RecentFile{Path: filepath.Join("/m", string(rune('a'+i)), string(rune('0'+j))), Used: base.Add(time.Duration(10*j+i) * time.Minute), Role: "target"})
				if err := st.saveSettings(set); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	set, _, err := s.loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Recent) != 10 {
		t.Fatalf("recent files after two windows saved 5 each: %d, want 10: %v", len(set.Recent), set.Recent)
	}
	for i := 1; i < len(set.Recent); i++ {
		if set.Recent[i].Used.After(set.Recent[i-1].Used) {
			t.Errorf("recent files not newest first: %v", set.Recent)
		}
	}
}

func TestMergeRecent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := []RecentFile{{Path: "/x", Used: t0.Add(3 * time.Hour)}, {Path: "/y", Used: t0}}
	b := []RecentFile{{Path: "/y", Used: t0.Add(5 * time.Hour)}, {Path: "/z", Used: t0.Add(time.Hour)}}
	got := mergeRecent(a, b)
	want := []string{"/y", "/x", "/z"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i, w := range want {
		if got[i].Path != w {
			t.Errorf("position %d: %s, want %s (%v)", i, got[i].Path, w, got)
		}
	}
	var many []RecentFile
	for i := range 2 * maxRecent {
		many = addRecent(many, RecentFile{Path: string(rune('A' + i)), Used: t0.Add(time.Duration(i) * time.Minute)})
	}
	if len(many) != maxRecent || many[0].Path != string(rune('A'+2*maxRecent-1)) {
		t.Errorf("list not capped newest first: %v", many)
	}
}

// Files opened as drafts are not offered as targets, and the other way
// round; lists saved before roles were kept offer their files for both.
// Each role keeps its own maxRecent.
func TestRecentPerRole(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var list []RecentFile
	list = addRecent(list, RecentFile{Path: "/old.gguf", Used: t0})
	list = addRecent(list, RecentFile{Path: "/target.gguf", Used: t0.Add(time.Minute), Role: "target"})
	list = addRecent(list, RecentFile{Path: "/eagle3.gguf", Used: t0.Add(2 * time.Minute), Role: "draft"})
	paths := func(rs []RecentFile) (out []string) {
		for _, r := range rs {
			out = append(out, r.Path)
		}
		return out
	}
	if got := paths(recentFor(list, "target")); !slices.Equal(got, []string{"/target.gguf", "/old.gguf"}) {
		t.Errorf("target's recent files %v", got)
	}
	if got := paths(recentFor(list, "draft")); !slices.Equal(got, []string{"/eagle3.gguf", "/old.gguf"}) {
		t.Errorf("draft's recent files %v", got)
	}
	for i := range maxRecent + 3 {
		list = addRecent(list, RecentFile{Path: fmt.Sprintf("/d%d.gguf", i), Used: t0.Add(time.Hour + time.Duration(i)*time.Minute), Role: "draft"})
	}
	if got := recentFor(list, "target"); len(got) != 2 {
		t.Errorf("a burst of drafts pushed targets out: %v", paths(got))
	}
}

// A first start has no system prompt (the demo pair answers best without
// one) and greedy sampling: the Precise preset.
func TestDefaultSettingsForTheDemo(t *testing.T) {
	c := defaultSettings().Chat
	if c.System != "" || c.Preset != presetPrecise || c.sampling().Temperature != 0 {
		t.Errorf("default chat settings %+v", c)
	}
}
