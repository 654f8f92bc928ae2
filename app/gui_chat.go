//go:build !headless

package app

import (
	"context"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

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
	conv  *Conversation   // the open one
	saved map[*Conversation]savedAs

	cancel  context.CancelFunc // non-nil while generating
	editing int                // index of the user message being edited; -1: none

	notice *notices
	view   *widgets.ChatView
	meter  *widgets.Meter
	input  *promptEntry
	send   *widget.Button
	stop   *widget.Button
	list   *widget.List
	engine *widget.Label
	system *widget.Entry
	// settings is the side panel's accordion; remoteURL its remote server's
	// address field.
	settings  *widget.Accordion
	remoteURL *widget.Entry
}

// newChatPage builds the page and reads the saved conversations; the
// caller puts content in its window and menu() in the window's menu.
func newChatPage(m *mainWindow) *chatPage {
	c := &chatPage{m: m, editing: -1, saved: map[*Conversation]savedAs{}}
	c.notice = newNotices()
	c.view = widgets.NewChatView()
	c.view.OnEdit = c.edit
	c.view.OnRegenerate = func(int) { c.regenerate() }
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
	center := container.NewBorder(nil, container.NewVBox(c.meter, prompt, c.engine), nil, nil, c.view)

	c.list = widget.NewList(func() int { return len(c.convs) },
		func() fyne.CanvasObject {
			l := widget.NewLabel("")
			l.Truncation = fyne.TextTruncateEllipsis
			return l
		},
		func(i widget.ListItemID, o fyne.CanvasObject) {
			title := c.convs[i].Title
			if c.convs[i].ReadOnly {
				title += " (read-only)"
			}
			o.(*widget.Label).SetText(title)
		})
	c.list.OnSelected = func(i widget.ListItemID) {
		if i < len(c.convs) && c.convs[i] != c.conv {
			c.open(c.convs[i])
		}
	}
	newBtn := widget.NewButtonWithIcon("New chat", theme.ContentAddIcon(), c.newChat)
	side := container.NewBorder(newBtn, container.NewVBox(
		widget.NewButtonWithIcon("Export…", theme.DocumentSaveIcon(), c.export),
		widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), c.deleteChat)), nil, nil, c.list)

	split := container.NewHSplit(side, container.NewHSplit(center, c.settingsPanel()))
	split.Offset = 0.2
	split.Trailing.(*container.Split).Offset = 0.72
	c.content = container.NewBorder(c.notice.box, nil, nil, nil, split)
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
