//go:build !headless

package app

import (
	"testing"

	"fyne.io/fyne/v2"
)

// The window declares that it calls Fyne only from the main goroutine,
// keeping what the metadata said (a packaged build's) and leaving the
// caller's map alone.
func TestWithFyneDo(t *testing.T) {
	for _, md := range []fyne.AppMetadata{
		{}, // a plain go build beside no FyneApp.toml
		{ID: "run.tandem.app", Name: "Tandem", Version: "0.1.0", Migrations: map[string]bool{"other": true}},
	} {
		got := withFyneDo(md)
		if !got.Migrations["fyneDo"] {
			t.Errorf("withFyneDo(%+v) declares no fyneDo migration: %+v", md, got.Migrations)
		}
		if got.ID != appID || got.Name != "Tandem" {
			t.Errorf("withFyneDo(%+v) is named %q, id %q", md, got.Name, got.ID)
		}
		if md.Migrations != nil && (!got.Migrations["other"] || md.Migrations["fyneDo"]) {
			t.Errorf("withFyneDo(%+v) lost the other migration or changed the caller's map: %+v", md, got.Migrations)
		}
		if got.Version != md.Version {
			t.Errorf("version %q, want %q kept", got.Version, md.Version)
		}
	}
}
