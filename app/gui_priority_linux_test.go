package app

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// threadNice reads a thread's niceness from /proc (field 19 of its stat,
// counted after the command's closing parenthesis).
func threadNice(t *testing.T, tid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The window's thread keeps its priority and every other thread, a model's
// workers among them, yields to it by the steps asked, counted from the
// window's own niceness: one already started, and one the runtime starts
// afterwards.
func TestLowerOtherThreads(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self := syscall.Gettid()
	before := threadNice(t, self)

	other := make(chan int)
	release := make(chan struct{})
	defer close(release)
	go func() {
		runtime.LockOSThread() // a thread of its own, kept until the test ends
		other <- syscall.Gettid()
		<-release
	}()
	tid := <-other

	if err := lowerOtherThreads(3); err != nil {
		t.Fatal(err)
	}
	if got := threadNice(t, tid); got != before+3 {
		t.Errorf("another thread's nice is %d, want %d", got, before+3)
	}
	if got := threadNice(t, self); got != before {
		t.Errorf("the calling thread's nice is %d, want it kept at %d", got, before)
	}

	// A thread started after the call inherits the lower priority.
	later := make(chan int)
	go func() {
		runtime.LockOSThread()
		later <- syscall.Gettid()
		<-release
	}()
	if got := threadNice(t, <-later); got < before+3 {
		t.Errorf("a thread started later has nice %d, want at least %d", got, before+3)
	}

	// Already nicer threads are not raised back.
	if err := lowerOtherThreads(1); err != nil {
		t.Fatal(err)
	}
	if got := threadNice(t, tid); got != before+3 {
		t.Errorf("a second, smaller nice changed another thread to %d", got)
	}
}
