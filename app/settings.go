package app

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/plan"
)

// settingsVersion is the settings.json schema this build reads and writes.
// A file with a higher version is kept aside, not overwritten.
const settingsVersion = 1

const settingsFile = "settings.json"

// maxRecent bounds the recent-files list of each role.
const maxRecent = 12

// Settings is everything the window remembers between runs.
type Settings struct {
	Version int          `json:"version"`
	Target  string       `json:"target,omitempty"` // model paths last chosen
	Draft   string       `json:"draft,omitempty"`
	Recent  []RecentFile `json:"recent,omitempty"` // newest first
	Layout  Layout       `json:"layout"`
	Chat    ChatSettings `json:"chat"`
	Remote  Remote       `json:"remote"`
	// Simulation is the simulated devices last planned for, with their
	// layout; nil: none (gui_simulate.go).
	Simulation *Simulation `json:"simulation,omitempty"`
}

// Simulation is a layout for simulated devices (device.ParseSimulated).
type Simulation struct {
	Spec   string `json:"spec"`
	Layout Layout `json:"layout"`
}

// RecentFile is a model file the user opened, and as what: a file chosen
// as a draft is not offered as a target, and the other way round. Role is
// "target" or "draft"; "" (lists saved before roles were kept) is offered
// for both.
type RecentFile struct {
	Path string    `json:"path"`
	Used time.Time `json:"used"`
	Role string    `json:"role,omitempty"`
}

// Layout is the placement the GPU canvas shows. Devices are inventory
// indices (the CPU's follows the GPUs'); DeviceIDs says which device each
// index was when the layout was saved, so the next start finds them again
// (layout_devices.go).
type Layout struct {
	TargetDevices []int     `json:"target_devices,omitempty"`
	TargetRatios  []float64 `json:"target_ratios,omitempty"`
	Split         string    `json:"split,omitempty"` // "layer" or "tensor"
	Head          string    `json:"head,omitempty"`  // "" (auto), "single", "replicated" or "split"
	DraftDevices  []int     `json:"draft_devices,omitempty"`
	Borrow        string    `json:"borrow,omitempty"` // "target" or "copy"
	Ctx           int       `json:"ctx,omitempty"`
	// CtxOverride allows a context past the target's trained length.
	CtxOverride bool   `json:"ctx_past_trained,omitempty"`
	KVType      string `json:"kv_type,omitempty"` // K and V: "f16", "q8_0", "q4_0" or "f32" (plan.ParseKVType)
	// Parallel is the requests the API server decodes together, each with
	// a KV cache of the context (tandem serve --parallel); 0: 1.
	Parallel int `json:"parallel,omitempty"`
	// TargetCPUMoE and DraftCPUMoE keep a model's routed experts in system
	// RAM, on the CPU device (--cpu-moe, --cpu-moe-draft).
	TargetCPUMoE bool           `json:"target_cpu_moe,omitempty"`
	DraftCPUMoE  bool           `json:"draft_cpu_moe,omitempty"`
	DeviceIDs    map[int]string `json:"device_ids,omitempty"` // index -> deviceID when saved
}

// ChatSettings are the sampling and drafting settings of the chat page.
type ChatSettings struct {
	System string `json:"system"`
	// Preset names the sampling preset the settings were last set from
	// (samplingPresets); "" once a value was typed by hand.
	Preset        string  `json:"preset,omitempty"`
	Temperature   float64 `json:"temperature"`
	TopK          int     `json:"top_k"`
	TopP          float64 `json:"top_p"`
	MinP          float64 `json:"min_p"`
	RepeatPenalty float64 `json:"repeat_penalty,omitempty"` // 0 or 1: off
	Seed          uint64  `json:"seed"`
	MaxTokens     int     `json:"max_tokens"`
	UseDraft      bool    `json:"use_draft"`
	DraftMax      int     `json:"draft_max"`
	DraftPMin     float64 `json:"draft_p_min"`
	Lookup        bool    `json:"lookup"`
}

// Remote is an OpenAI-compatible server the chat page can talk to
// instead of the local engine.
type Remote struct {
	Use bool   `json:"use"`
	URL string `json:"url,omitempty"`
	Key string `json:"key,omitempty"`
}

// defaultSettings is a first start: the demo pair is chosen elsewhere.
// There is no default system prompt: the demo pair learnt its chat turns
// mostly without one, and with "You are a helpful assistant." it answers
// "Quote Genesis 1:3." from Genesis 36 (issue 26); a model's own template
// adds the system prompt it wants when none is given. Sampling starts
// greedy (the Precise preset), which shows what a model memorised.
func defaultSettings() Settings {
	drafting := engine.DefaultDrafting()
	chat := ChatSettings{MaxTokens: 256, UseDraft: true, DraftMax: drafting.Max, DraftPMin: drafting.PMin}
	chat.applyPreset(presetPrecise)
	return Settings{
		Version: settingsVersion,
		Layout: Layout{Split: string(plan.SplitLayer), Borrow: string(plan.BorrowInPlace),
			KVType: plan.KVTypeName(plan.DefaultKVType)},
		Chat: chat,
	}
}

// loadSettings reads settings.json. A missing file gives the defaults; an
// unreadable one, or one from a newer Tandem, is kept aside and gives the
// defaults with note saying so.
func (s *store) loadSettings() (set Settings, note string, err error) {
	err = s.locked(func() error {
		var why error
		set, why = s.readSettings()
		if why == nil || errors.Is(why, fs.ErrNotExist) {
			return nil
		}
		var err error
		note, err = s.keepAside(filepath.Join(s.dir, settingsFile), why)
		set = defaultSettings()
		return err
	})
	if note != "" {
		note += " Tandem started with default settings."
	}
	return set, note, err
}

// readSettings parses settings.json; on any error it returns the defaults
// and the reason.
func (s *store) readSettings() (Settings, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, settingsFile))
	if err != nil {
		return defaultSettings(), err
	}
	var probe struct{ Version int }
	if err := json.Unmarshal(b, &probe); err != nil {
		return defaultSettings(), fmt.Errorf("not valid JSON: %w", err)
	}
	switch {
	case probe.Version > settingsVersion:
		return defaultSettings(), fmt.Errorf("schema version %d: %w", probe.Version, errNewer)
	case probe.Version < 1:
		return defaultSettings(), fmt.Errorf("no schema version")
	}
	set := defaultSettings()
	if err := json.Unmarshal(b, &set); err != nil {
		return defaultSettings(), fmt.Errorf("not valid settings: %w", err)
	}
	return set, nil
}

// saveSettings writes set, merged with what another Tandem may have saved
// since: the recent-file lists are joined (newest use wins), everything
// else is set's.
func (s *store) saveSettings(set Settings) error {
	return s.locked(func() error {
		disk, err := s.readSettings()
		if err == nil {
			set.Recent = mergeRecent(set.Recent, disk.Recent)
		}
		set.Version = settingsVersion
		return writeJSON(filepath.Join(s.dir, settingsFile), set)
	})
}

// addRecent puts r first in the list.
func addRecent(list []RecentFile, r RecentFile) []RecentFile {
	return mergeRecent([]RecentFile{r}, list)
}

// mergeRecent joins two recent-file lists: one entry per path and role
// with its latest use, newest first, at most maxRecent of each role.
func mergeRecent(a, b []RecentFile) []RecentFile {
	type key struct{ path, role string }
	latest := make(map[key]time.Time)
	for _, r := range slices.Concat(a, b) {
		k := key{r.Path, r.Role}
		if t, ok := latest[k]; !ok || r.Used.After(t) {
			latest[k] = r.Used
		}
	}
	out := make([]RecentFile, 0, len(latest))
	for k, t := range latest {
		out = append(out, RecentFile{Path: k.path, Used: t, Role: k.role})
	}
	slices.SortFunc(out, func(x, y RecentFile) int {
		if c := y.Used.Compare(x.Used); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(x.Path, y.Path), cmp.Compare(x.Role, y.Role))
	})
	kept := map[string]int{}
	return slices.DeleteFunc(out, func(r RecentFile) bool {
		kept[r.Role]++
		return kept[r.Role] > maxRecent
	})
}

// recentFor is the recent files offered for role, newest first: those
// opened as role, and those of lists saved before roles were kept.
func recentFor(list []RecentFile, role string) []RecentFile {
	var out []RecentFile
	for _, r := range list {
		if (r.Role == role || r.Role == "") && !slices.ContainsFunc(out, func(o RecentFile) bool { return o.Path == r.Path }) {
			out = append(out, r)
		}
	}
	return out
}
