package app

import (
	"io"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine"
)

// tandem run --preset takes the preset's values; sampling flags given with
// it win; an unknown preset is an error that names the known ones.
func TestRunPresetFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want engine.Sampling
	}{
		{nil, engine.Sampling{RepeatPenalty: 1}}, // greedy by default, as before presets
		{[]string{"--preset", "balanced"}, engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1.1}},
		{[]string{"--preset", "Balanced", "--temp", "0.3", "--repeat-penalty", "1.3", "--seed", "9"},
			engine.Sampling{Temperature: 0.3, TopK: 40, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1.3, Seed: 9}},
		{[]string{"--preset", "precise"}, engine.Sampling{RepeatPenalty: 1}},
		{[]string{"--repeat-penalty", "1.2"}, engine.Sampling{RepeatPenalty: 1.2}},
	} {
		fs := newFlags("run", io.Discard)
		var sf samplingFlags
		sf.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		got, err := sf.sampling(fs)
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
	fs := newFlags("run", io.Discard)
	var sf samplingFlags
	sf.register(fs)
	fs.Parse([]string{"--preset", "wild"})
	if _, err := sf.sampling(fs); err == nil || !strings.Contains(err.Error(), "precise, balanced, creative") {
		t.Errorf("unknown preset: %v", err)
	}
}

// The window's presets are the same table: choosing one sets the fields
// the engine request carries.
func TestChatSettingsPreset(t *testing.T) {
	var c ChatSettings
	c.Seed = 5
	c.applyPreset("creative")
	if got := c.sampling(); got != (engine.Sampling{Temperature: 1, TopK: 100, TopP: 0.98, MinP: 0.02, RepeatPenalty: 1.05, Seed: 5}) || c.Preset != presetCreative {
		t.Errorf("creative: %+v (%q)", got, c.Preset)
	}
	c.applyPreset("nonsense")
	if c.Preset != presetCreative {
		t.Errorf("an unknown preset changed the settings: %+v", c)
	}
}
