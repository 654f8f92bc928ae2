//go:build !headless

package app

import (
	"fmt"
	"os"
	"slices"
	"strings"

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

// open shows conv.
func (c *chatPage) open(conv *Conversation) {
	if c.cancel != nil {
		c.stopGenerating()
	}
	c.conv, c.editing = conv, -1
	c.showTranscript(-1)
	c.meter.Set(0, "")
	if i := slices.Index(c.convs, conv); i >= 0 {
		c.list.Select(i)
	}
	c.list.Refresh()
	c.refresh()
	c.showSystem()
	c.readOnly()
}

// loadConversations reads the saved conversations (on the disk worker) and
// reopens the newest.
func (c *chatPage) loadConversations() {
	c.m.disk.add(func() {
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
				c.open(c.convs[0])
			} else {
				c.list.Refresh()
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
			conv.ID, conv.Revision = snap.ID, snap.Revision
			if forked {
				conv.Title = snap.Title
				c.notice.Set(widgets.NoticeInfo, "Another Tandem window changed this conversation; yours was saved as a copy.", "")
			}
			c.list.Refresh()
		})
	})
}

// deleteChat deletes the open conversation.
func (c *chatPage) deleteChat() {
	conv := c.conv
	if conv == nil || c.cancel != nil || c.readOnly() {
		return
	}
	c.convs = slices.DeleteFunc(c.convs, func(x *Conversation) bool { return x == conv })
	c.conv = nil
	c.m.disk.add(func() {
		id := conv.ID
		if s, ok := c.saved[conv]; ok {
			id = s.id
		}
		delete(c.saved, conv)
		if id == "" {
			return
		}
		if err := c.m.store.deleteConversation(id); err != nil {
			c.m.post(func() {
				c.notice.Set(widgets.NoticeError, "The conversation could not be deleted: "+sentence(err), err.Error())
			})
		}
	})
	c.list.UnselectAll()
	if len(c.convs) > 0 {
		c.open(c.convs[0])
	} else {
		c.newChat()
	}
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
