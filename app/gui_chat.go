//go:build !headless

package app

import (
	"context"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/tandem-run/tandem/assets"
	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/widgets"
)

// chatPage is the chat, the main window's second page: saved conversations
// on the left, the transcript and the prompt in the middle, sampling,
// drafting and engine settings on the right. It shares the main window
// rather than opening one of its own, so that the chat appearing at the end
// of a load costs a page switch, not a new OS window and GL context (a
// third of a second of frozen UI under software GL). Like mainWindow, its
// fields belong to the main goroutine.
type chatPage struct {
	m       *mainWindow
	content fyne.CanvasObject

	local    generator // the loaded local models; nil: none
	localCfg engine.Config

	convs []*Conversation // newest first
	shown []*Conversation // convs the search matches, as listed
	conv  *Conversation   // the open one
	saved map[*Conversation]savedAs
	// deleted are the deleted conversations whose files wait aside for
	// an Undo; like saved, only the disk worker's jobs touch it.
	deleted map[*Conversation]savedAs
	pending *deletedChat // the deleted conversation Undo brings back; nil: none

	now func() time.Time // the clock: when answers start, when chats were used

	cancel  context.CancelFunc // non-nil while generating
	live    streamChunk        // what the answer streaming now (or last) has brought
	editing int                // index of the user message being edited; -1: none

	notice *notices
	view   *widgets.ChatView
	meter  *widgets.Meter
	input  *promptEntry
	send   *widget.Button
	stop   *widget.Button
	list   *widget.List
	search *widget.Entry
	title  *widget.Entry // the open conversation's title; typing renames it
	// titleQuiet is set while code fills title.
	titleQuiet bool
	engine     *widget.Label
	system     *widget.Entry
	// settings is the side panel's accordion; remoteURL its remote server's
	// address field.
	settings  *widget.Accordion
	remoteURL *widget.Entry
	// preset, presetAbout and samplingFields are the sampling preset's
	// choice, its one-line description and the fields it sets
	// (temperature, top-k, top-p, min-p, repeat penalty); presetQuiet is
	// set while code fills them.
	preset         *widget.Select
	presetAbout    *widget.Label
	samplingFields []*widget.Entry
	presetQuiet    bool
}

// newChatPage builds the page and reads the saved conversations; the
// caller puts content in its window and menu() in the window's menu.
func newChatPage(m *mainWindow) *chatPage {
	c := &chatPage{m: m, editing: -1, saved: map[*Conversation]savedAs{}, deleted: map[*Conversation]savedAs{}, now: m.store.now}
	c.notice = newNotices()
	c.view = widgets.NewChatView()
	c.view.OnEdit = c.edit
	c.view.OnRegenerate = func(int) { c.regenerate() }
	c.view.OnCopy = func(text string) { m.app.Clipboard().SetContent(text) }
	c.view.OnSuggestion = func(prompt string) {
		c.input.SetText(prompt)
		c.sendInput()
	}
	c.meter = widgets.NewMeter()
	c.engine = widget.NewLabel("")
	c.engine.Importance = widget.LowImportance
	c.engine.Truncation = fyne.TextTruncateEllipsis
	c.input = newPromptEntry()
	c.input.SetPlaceHolder("Message (Ctrl+Enter to send, Esc to stop)")
	c.input.onEscape = c.escape
	c.send = widget.NewButtonWithIcon("Send", theme.MailSendIcon(), c.sendInput)
	c.send.Importance = widget.HighImportance
	c.stop = widget.NewButtonWithIcon("Stop", theme.MediaStopIcon(), c.stopGenerating)

	prompt := container.NewBorder(nil, nil, nil, container.NewVBox(c.send, c.stop), c.input)
	c.title = widget.NewEntry()
	c.title.SetPlaceHolder("Chat title")
	c.title.OnChanged = c.rename
	center := container.NewBorder(c.title, container.NewVBox(c.meter, prompt, c.engine), nil, nil, c.view)

	c.list = widget.NewList(func() int { return len(c.shown) },
		func() fyne.CanvasObject {
			r := widget.NewRichText(&widget.TextSegment{Style: widget.RichTextStyleParagraph},
				&widget.TextSegment{Style: widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, SizeName: theme.SizeNameCaptionText}})
			r.Truncation = fyne.TextTruncateEllipsis
			return r
		},
		func(i widget.ListItemID, o fyne.CanvasObject) {
			if i >= len(c.shown) {
				return
			}
			conv := c.shown[i]
			title := conv.Title
			if conv.ReadOnly {
				title += " (read-only)"
			}
			r := o.(*widget.RichText)
			r.Segments[0].(*widget.TextSegment).Text = title
			r.Segments[1].(*widget.TextSegment).Text = when(conv.Updated, c.now())
			r.Refresh()
		})
	c.list.OnSelected = func(i widget.ListItemID) {
		if i < len(c.shown) && c.shown[i] != c.conv {
			c.open(c.shown[i])
		}
	}
	c.search = widget.NewEntry()
	c.search.SetPlaceHolder("Search chats")
	c.search.OnChanged = func(string) { c.listChats() }
	newBtn := widget.NewButtonWithIcon("New chat", theme.ContentAddIcon(), c.newChat)
	side := container.NewBorder(container.NewVBox(newBtn, c.search), container.NewVBox(
		widget.NewButtonWithIcon("Export…", theme.DocumentSaveIcon(), c.export),
		widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), c.deleteChat)), nil, nil, c.list)

	split := container.NewHSplit(side, container.NewHSplit(center, c.settingsPanel()))
	split.Offset = 0.2
	split.Trailing.(*container.Split).Offset = 0.72
	page := container.NewBorder(c.notice.box, nil, nil, nil, split)
	c.notice.in(page)
	c.content = page
	// Ctrl+Enter on the keypad, and Esc when the prompt is not focused.
	cv := m.win.Canvas()
	cv.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyEnter, Modifier: fyne.KeyModifierShortcutDefault}, func(fyne.Shortcut) { c.sendInput() })
	cv.SetOnTypedKey(func(k *fyne.KeyEvent) {
		if k.Name == fyne.KeyEscape {
			c.escape()
		}
	})
	c.loadConversations()
	c.refresh()
	return c
}

// menu is the chat's menu in the window's menu bar; starting a chat or a
// reply from the Models page shows the chat page.
func (c *chatPage) menu() *fyne.Menu {
	ctrl := fyne.KeyModifierShortcutDefault
	return fyne.NewMenu("Chat",
		&fyne.MenuItem{Label: "Send", Action: c.sendInput, Shortcut: &desktop.CustomShortcut{KeyName: fyne.KeyReturn, Modifier: ctrl}},
		&fyne.MenuItem{Label: "New chat", Action: func() { c.newChat(); c.m.openChat() }, Shortcut: &desktop.CustomShortcut{KeyName: fyne.KeyN, Modifier: ctrl}},
		&fyne.MenuItem{Label: "Regenerate", Action: func() { c.m.pages.Select(c.m.chatTab); c.regenerate() }, Shortcut: &desktop.CustomShortcut{KeyName: fyne.KeyR, Modifier: ctrl}},
		&fyne.MenuItem{Label: "Export as Markdown…", Action: c.export, Shortcut: &desktop.CustomShortcut{KeyName: fyne.KeyE, Modifier: ctrl}},
		fyne.NewMenuItemSeparator(),
		&fyne.MenuItem{Label: "Rename chat", Action: func() { c.m.openChat(); c.m.win.Canvas().Focus(c.title) }},
		&fyne.MenuItem{Label: "Delete chat", Action: c.deleteChat},
	)
}

// promptEntry is the multi-line prompt; Esc stops a generation (or an edit).
type promptEntry struct {
	widget.Entry
	onEscape func()
}

func newPromptEntry() *promptEntry {
	e := &promptEntry{}
	e.MultiLine = true
	e.Wrapping = fyne.TextWrapWord
	e.SetMinRowsVisible(3)
	e.ExtendBaseWidget(e)
	return e
}

func (e *promptEntry) TypedKey(k *fyne.KeyEvent) {
	if k.Name == fyne.KeyEscape && e.onEscape != nil {
		e.onEscape()
		return
	}
	e.Entry.TypedKey(k)
}

// useLocal makes the loaded local models (nil: none) the chat's engine.
func (c *chatPage) useLocal(g generator, cfg engine.Config) {
	c.local, c.localCfg = g, cfg
	var prompts []string
	if g != nil && isDemoPath(cfg.Target) {
		prompts = assets.DemoPrompts()
	}
	c.view.SetSuggestions(prompts)
	c.refresh()
}

// refresh updates the buttons and the engine line.
func (c *chatPage) refresh() {
	busy := c.cancel != nil
	enable(c.send, !busy && (c.conv == nil || !c.conv.ReadOnly))
	enable(c.stop, busy)
	_, label, err := c.generator()
	if err != nil {
		c.engine.SetText(sentence(err))
	} else {
		c.engine.SetText(label)
	}
}

// readOnly reports whether the open conversation is one a newer Tandem
// wrote, and says so: it can be read, not changed.
func (c *chatPage) readOnly() bool {
	if c.conv == nil || !c.conv.ReadOnly {
		return false
	}
	c.notice.Set(widgets.NoticeInfo, "This conversation was saved by a newer version of Tandem and is read-only here; start a new chat to go on.", "")
	return true
}

// escape stops a generation, or leaves editing.
func (c *chatPage) escape() {
	switch {
	case c.cancel != nil:
		c.stopGenerating()
	case c.editing >= 0:
		c.editing = -1
		c.input.SetText("")
		c.notice.Hide()
	}
}
