package app

import (
	"os"
	"os/signal"
	"time"
)

// quitGrace is how long the window gets to close after SIGINT/SIGTERM
// before the signal's default action ends the process.
const quitGrace = 5 * time.Second

// quitOnSignal closes the window on the first signal from sig (quit) and
// waits for done, the close finishing. The close can wedge: in about 2 of 45
// starts under Xvfb, Fyne 2.7.1's lifecycle goroutine waited in
// runOnMainWithWait for a main loop already asleep in WaitForEvents, and the
// process outlived its window. So while it waits it wakes the main loop
// every tick (kick posts an empty function), and when a second signal comes
// or grace has passed it hands the signal to die, which restores its default
// action and raises it again: the process ends the way the sender asked,
// with no os.Exit below main. Settings are written as they change, so a
// wedged close loses nothing the user did. It returns when done closes or
// sig is closed.
func quitOnSignal(sig <-chan os.Signal, done <-chan struct{}, quit, kick func(), die func(os.Signal), tick func(time.Duration) <-chan time.Time, grace time.Duration) {
	var first os.Signal
	select {
	case s, ok := <-sig:
		if !ok {
			return
		}
		first = s
	case <-done:
		return
	}
	quit()
	left := grace
	const every = 250 * time.Millisecond
	for {
		select {
		case <-done:
			return
		case s, ok := <-sig:
			if ok {
				die(s)
				return
			}
			sig = nil // closed: only the grace period can end the wait now
		case <-tick(every):
			left -= every
			if left <= 0 {
				die(first)
				return
			}
			kick()
		}
	}
}

// raiseDefault ends the process by s's default action.
func raiseDefault(s os.Signal) {
	signal.Reset(s)
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Signal(s) // if even this fails the process waits on, as before
	}
}
