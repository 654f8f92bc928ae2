//go:build !headless

package app

import (
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// settingsPanel is the chat's settings: system prompt, sampling, drafting
// and which engine answers. Every change is saved.
func (c *chatPage) settingsPanel() fyne.CanvasObject {
	s := &c.m.set.Chat
	changed := func() {
		c.m.saveSettings()
		c.refresh()
	}
	c.system = widget.NewMultiLineEntry()
	c.system.Wrapping = fyne.TextWrapWord
	c.system.SetMinRowsVisible(3)
	c.system.OnChanged = func(text string) {
		s.System = text // the default for new chats
		if c.conv != nil {
			c.conv.System = text
		}
		changed()
	}

	useDraft := widget.NewCheck("Use the draft", func(on bool) { s.UseDraft = on; changed() })
	useDraft.SetChecked(s.UseDraft)
	lookup := widget.NewCheck("Prompt lookup", func(on bool) { s.Lookup = on; changed() })
	lookup.SetChecked(s.Lookup)
	reload := widget.NewButton("Reload with these", func() { c.m.startLoad() })
	loadNote := widget.NewLabel("Draft length, threshold and prompt lookup apply when the models are loaded.")
	loadNote.Wrapping = fyne.TextWrapWord
	loadNote.Importance = widget.LowImportance

	remote := widget.NewCheck("Use a remote server (OpenAI-compatible)", func(on bool) { c.m.set.Remote.Use = on; changed() })
	remote.SetChecked(c.m.set.Remote.Use)
	url := widget.NewEntry()
	url.SetPlaceHolder("http://host:8000/v1")
	url.SetText(c.m.set.Remote.URL)
	url.OnChanged = func(v string) { c.m.set.Remote.URL = v; changed() }
	key := widget.NewPasswordEntry()
	key.SetPlaceHolder("API key (optional)")
	key.SetText(c.m.set.Remote.Key)
	key.OnChanged = func(v string) { c.m.set.Remote.Key = v; changed() }

	// A value typed by hand makes the settings the user's own (Custom);
	// choosing a preset writes its values into the fields.
	handTyped := func() {
		if !c.presetQuiet {
			s.Preset = ""
			c.showPreset()
		}
		changed()
	}
	c.samplingFields = []*widget.Entry{
		floatEntry(&s.Temperature, handTyped), intEntry(&s.TopK, handTyped), floatEntry(&s.TopP, handTyped),
		floatEntry(&s.MinP, handTyped), floatEntry(&s.RepeatPenalty, handTyped),
	}
	var names []string
	for _, p := range samplingPresets() {
		names = append(names, presetTitle(p.name))
	}
	c.preset = widget.NewSelect(append(names, presetCustom), func(title string) {
		if c.presetQuiet || title == presetCustom {
			return
		}
		s.applyPreset(strings.ToLower(title))
		c.showPreset()
		changed()
	})
	c.presetAbout = lowLabel("")
	form := widget.NewForm(
		widget.NewFormItem("Preset", c.preset),
		widget.NewFormItem("Temperature", c.samplingFields[0]),
		widget.NewFormItem("Top-k", c.samplingFields[1]),
		widget.NewFormItem("Top-p", c.samplingFields[2]),
		widget.NewFormItem("Min-p", c.samplingFields[3]),
		widget.NewFormItem("Repeat penalty", c.samplingFields[4]),
		widget.NewFormItem("Seed", uintEntry(&s.Seed, changed)),
		widget.NewFormItem("Max tokens", intEntry(&s.MaxTokens, changed)),
	)
	c.showPreset()
	draftForm := widget.NewForm(
		widget.NewFormItem("Draft at most", intEntry(&s.DraftMax, changed)),
		widget.NewFormItem("Stop below p", floatEntry(&s.DraftPMin, changed)),
	)
	acc := widget.NewAccordion(
		widget.NewAccordionItem("System prompt", c.system),
		widget.NewAccordionItem("Sampling", container.NewVBox(form, c.presetAbout,
			lowLabel("Temperature 0 is greedy; a repeat penalty of 1 is off; drafts are verified under these same settings."))),
		widget.NewAccordionItem("Drafting", container.NewVBox(useDraft, draftForm, lookup, loadNote, reload)),
		widget.NewAccordionItem(engineSettings, container.NewVBox(remote, url, key)),
	)
	acc.MultiOpen = true
	acc.Open(1)
	acc.Open(2)
	c.settings, c.remoteURL = acc, url
	return container.NewVScroll(acc)
}

// presetCustom is the preset choice that stands for values typed by hand.
const presetCustom = "Custom"

// presetTitle is a preset's name as the side panel shows it.
func presetTitle(name string) string {
	if name == "" {
		return presetCustom
	}
	return strings.ToUpper(name[:1]) + name[1:]
}

// showPreset shows the chosen preset and its values in the fields.
func (c *chatPage) showPreset() {
	s := c.m.set.Chat
	c.presetQuiet = true
	defer func() { c.presetQuiet = false }()
	c.preset.SetSelected(presetTitle(s.Preset))
	c.presetAbout.SetText("")
	if p, err := findPreset(s.Preset); err == nil {
		c.presetAbout.SetText(p.about)
	}
	for i, v := range []string{formatFloat(s.Temperature), strconv.Itoa(s.TopK), formatFloat(s.TopP),
		formatFloat(s.MinP), formatFloat(s.RepeatPenalty)} {
		if c.samplingFields[i].Text != v {
			c.samplingFields[i].SetText(v)
		}
	}
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// engineSettings is the title of the settings item that says which engine
// answers.
const engineSettings = "Engine"

// showEngineSettings opens the Engine settings and puts the cursor in the
// remote server's address.
func (c *chatPage) showEngineSettings() {
	for i, it := range c.settings.Items {
		if it.Title == engineSettings {
			c.settings.Open(i)
		}
	}
	c.m.win.Canvas().Focus(c.remoteURL)
}

// showSystem shows the open conversation's system prompt.
func (c *chatPage) showSystem() {
	if c.conv != nil && c.system.Text != c.conv.System {
		on := c.system.OnChanged
		c.system.OnChanged = nil
		c.system.SetText(c.conv.System)
		c.system.OnChanged = on
	}
}

func lowLabel(s string) *widget.Label {
	l := widget.NewLabel(s)
	l.Wrapping = fyne.TextWrapWord
	l.Importance = widget.LowImportance
	return l
}

// floatEntry edits *v; text that is not a number is ignored.
func floatEntry(v *float64, changed func()) *widget.Entry {
	return numberEntry(formatFloat(*v), func(s string) error {
		x, err := strconv.ParseFloat(s, 64)
		if err == nil && x >= 0 {
			*v = x
		}
		return err
	}, changed)
}

func intEntry(v *int, changed func()) *widget.Entry {
	return numberEntry(strconv.Itoa(*v), func(s string) error {
		x, err := strconv.Atoi(s)
		if err == nil && x >= 0 {
			*v = x
		}
		return err
	}, changed)
}

func uintEntry(v *uint64, changed func()) *widget.Entry {
	return numberEntry(strconv.FormatUint(*v, 10), func(s string) error {
		x, err := strconv.ParseUint(s, 10, 64)
		if err == nil {
			*v = x
		}
		return err
	}, changed)
}

func numberEntry(text string, set func(string) error, changed func()) *widget.Entry {
	e := widget.NewEntry()
	e.SetText(text)
	e.OnChanged = func(s string) {
		if set(s) == nil {
			changed()
		}
	}
	return e
}
