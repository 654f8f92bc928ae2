//go:build !headless

package app

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tandem-run/tandem/widgets"
)

// savedAs is where a conversation was last written: ID and revision. The
// disk worker keeps it (in chatPage.saved, touched only by its jobs), so
// saves queued before the previous one finished still carry the right
// revision and are not mistaken for another window's edits.
type savedAs struct {
	id  string
	rev int
}

// current is the open conversation, started when there is none.
func (c *chatPage) current() *Conversation {
	if c.conv == nil {
		c.newChat()
	}
	return c.conv
}

// newChat opens a new, empty conversation.
func (c *chatPage) newChat() {
	if c.cancel != nil {
		return
	}
	if c.conv != nil && len(c.conv.Messages) == 0 {
		return // already a new one
	}
	conv := c.m.store.newConversation(c.m.set.Chat.System)
	c.convs = append([]*Conversation{conv}, c.convs...)
	c.open(conv)
}

// listChats lists the conversations the search matches, newest first
// (by their last change), and selects the open one.
func (c *chatPage) listChats() {
	slices.SortStableFunc(c.convs, func(a, b *Conversation) int { return b.Updated.Compare(a.Updated) })
	q := strings.ToLower(strings.TrimSpace(c.search.Text))
	c.shown = c.shown[:0]
	for _, conv := range c.convs {
		if q == "" || conv == c.conv || conv.matches(q) {
			c.shown = append(c.shown, conv)
		}
	}
	c.list.Refresh()
	if i := slices.Index(c.shown, c.conv); i >= 0 {
		c.list.Select(i)
	} else {
		c.list.UnselectAll()
	}
}

// when is a conversation's time in the chat list: "Today, 14:05",
// "Yesterday, 09:12", "3 Mar, 18:40", "3 Mar 2025".
func when(t, now time.Time) string {
	t = t.In(now.Location())
	y, m, d := t.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, now.Location())
	ny, nm, nd := now.Date()
	today := time.Date(ny, nm, nd, 0, 0, 0, 0, now.Location())
	switch {
	case t.IsZero():
		return ""
	case day.Equal(today):
		return "Today, " + t.Format("15:04")
	case day.Equal(today.AddDate(0, 0, -1)):
		return "Yesterday, " + t.Format("15:04")
	case y == ny:
		return t.Format("2 Jan, 15:04")
	}
	return t.Format("2 Jan 2006")
}

// rename gives the open conversation the title typed above it.
func (c *chatPage) rename(title string) {
	conv := c.conv
	title = strings.Join(strings.Fields(title), " ")
	if c.titleQuiet || conv == nil || title == "" || title == conv.Title || c.readOnly() {
		return
	}
	conv.Title = title
	c.list.Refresh()
	if len(conv.Messages) > 0 {
		c.save(conv) // an empty chat is saved with its first message
	}
}

// showTitle shows the open conversation's title above it.
func (c *chatPage) showTitle() {
	c.titleQuiet = true
	defer func() { c.titleQuiet = false }()
	if c.conv == nil {
		c.title.SetText("")
		return
	}
	if c.title.Text != c.conv.Title {
		c.title.SetText(c.conv.Title)
	}
	enable(c.title, !c.conv.ReadOnly)
}

// open shows conv.
func (c *chatPage) open(conv *Conversation) {
	if c.cancel != nil {
		c.stopGenerating()
	}
	c.conv, c.editing = conv, -1
	c.showTranscript(-1)
	c.meter.Set(0, "")
	c.listChats()
	c.refresh()
	c.showSystem()
	c.showTitle()
	c.readOnly()
}

// loadConversations reads the saved conversations (on the disk worker) and
// reopens the newest.
func (c *chatPage) loadConversations() {
	c.m.disk.add(func() {
		// Deleted conversations a window left aside when it crashed: their
		// Undo is long over.
		c.m.store.purgeStaleDeleted(c.m.store.now().Add(-2 * undoWindow))
		list, notes, err := c.m.store.loadConversations()
		c.m.post(func() {
			switch {
			case err != nil:
				c.notice.Set(widgets.NoticeError, "Saved conversations could not be read: "+sentence(err), err.Error())
			case len(notes) > 0:
				c.notice.Set(widgets.NoticeWarning, fmt.Sprintf("%d saved conversation file(s) could not be opened as usual (set aside, left in place or read-only): see Details.", len(notes)), strings.Join(notes, "\n"))
			}
			c.convs = append(c.convs, list...)
			if c.conv == nil && len(c.convs) > 0 {
				c.listChats()
				c.open(c.convs[0])
			} else {
				c.listChats()
			}
		})
	})
}

// save writes a copy of conv on the disk worker.
func (c *chatPage) save(conv *Conversation) {
	snap := *conv
	snap.Messages = slices.Clone(conv.Messages)
	c.m.disk.add(func() {
		if s, ok := c.saved[conv]; ok {
			snap.ID, snap.Revision = s.id, s.rev
		}
		forked, err := c.m.store.saveConversation(&snap)
		if err == nil {
			c.saved[conv] = savedAs{snap.ID, snap.Revision}
		}
		c.m.post(func() {
			if err != nil {
				c.notice.Set(widgets.NoticeError, "The conversation could not be saved: "+sentence(err), err.Error())
				return
			}
			conv.ID, conv.Revision, conv.Updated = snap.ID, snap.Revision, snap.Updated
			if forked {
				conv.Title = snap.Title
				c.notice.Set(widgets.NoticeInfo, "Another Tandem window changed this conversation; yours was saved as a copy.", "")
				if conv == c.conv {
					c.showTitle()
				}
			}
			c.listChats()
		})
	})
}

// undoWindow is how long a deleted conversation can be brought back.
const undoWindow = 30 * time.Second

// deletedChat is a deleted conversation whose Undo is offered.
type deletedChat struct {
	conv  *Conversation
	note  string // the notice that offers the Undo
	timer *time.Timer
}

// deleteChat deletes the open conversation, with an Undo: its file is
// moved aside, and removed only when the Undo is no longer offered (the
// notice is closed, undoWindow passes, another chat is deleted, or the
// window closes).
func (c *chatPage) deleteChat() {
	conv := c.conv
	if conv == nil || c.cancel != nil || c.readOnly() {
		return
	}
	c.commitDelete()
	c.convs = slices.DeleteFunc(c.convs, func(x *Conversation) bool { return x == conv })
	c.conv = nil
	known := savedAs{conv.ID, conv.Revision} // read here: the main goroutine writes them
	c.m.disk.add(func() {
		s, ok := c.saved[conv]
		if !ok && known.id != "" {
			s, ok = known, true
		}
		delete(c.saved, conv)
		if !ok {
			return // never saved: nothing on disk
		}
		if err := c.m.store.deleteConversation(s.id); err != nil {
			c.m.post(func() {
				c.notice.Set(widgets.NoticeError, "The conversation could not be deleted: "+sentence(err), err.Error())
			})
			return
		}
		c.deleted[conv] = s
	})
	if len(conv.Messages) > 0 {
		d := &deletedChat{conv: conv, note: fmt.Sprintf("Deleted “%s”.", conv.Title)}
		c.pending = d
		c.notice.SetAction(widgets.NoticeInfo, d.note, "Undo", c.undoDelete, c.commitDelete)
		d.timer = time.AfterFunc(undoWindow, func() {
			c.m.post(func() {
				if c.pending == d {
					c.commitDelete()
				}
			})
		})
	}
	c.list.UnselectAll()
	if len(c.convs) > 0 {
		c.open(c.convs[0])
	} else {
		c.newChat()
	}
}

// undoDelete brings the last deleted conversation back and opens it.
func (c *chatPage) undoDelete() {
	d := c.pending
	if d == nil {
		return
	}
	c.pending = nil
	d.timer.Stop()
	c.notice.Drop(d.note)
	conv := d.conv
	c.m.disk.add(func() {
		s, ok := c.deleted[conv]
		var err error
		if ok {
			delete(c.deleted, conv)
			if err = c.m.store.restoreConversation(s.id); err == nil {
				c.saved[conv] = s
			}
		}
		c.m.post(func() {
			if err != nil {
				c.notice.Set(widgets.NoticeError, "The conversation could not be brought back: "+sentence(err), err.Error())
				return
			}
			if c.conv != nil && len(c.conv.Messages) == 0 {
				// the empty chat that stood in for it goes
				c.convs = slices.DeleteFunc(c.convs, func(x *Conversation) bool { return x == c.conv })
			}
			c.convs = append(c.convs, conv)
			c.open(conv)
		})
	})
}

// commitDelete ends the Undo of the last deleted conversation: its file is
// removed for good.
func (c *chatPage) commitDelete() {
	d := c.pending
	if d == nil {
		return
	}
	c.pending = nil
	d.timer.Stop()
	c.notice.Drop(d.note)
	c.m.disk.add(func() {
		s, ok := c.deleted[d.conv]
		if !ok {
			return
		}
		delete(c.deleted, d.conv)
		if err := c.m.store.purgeDeleted(s.id); err != nil {
			c.m.post(func() {
				c.notice.Set(widgets.NoticeError, "A deleted conversation could not be removed: "+sentence(err), err.Error())
			})
		}
	})
}

// export writes the open conversation as Markdown where the user says.
func (c *chatPage) export() {
	conv := c.conv
	if conv == nil || len(conv.Messages) == 0 {
		return
	}
	md := conv.markdown()
	name := strings.Map(func(r rune) rune {
		if strings.ContainsRune(`/\:*?"<>|`, r) {
			return '-'
		}
		return r
	}, conv.Title) + ".md"
	c.m.picker.saveFile("Export the conversation as Markdown", name, func(path string) {
		if path == "" {
			return
		}
		c.m.disk.add(func() {
			err := os.WriteFile(path, []byte(md), 0o644)
			c.m.post(func() {
				if err != nil {
					c.notice.Set(widgets.NoticeError, "The export failed: "+sentence(err), err.Error())
				} else {
					c.notice.Set(widgets.NoticeInfo, "Exported to "+path+".", "")
				}
			})
		})
	})
}
