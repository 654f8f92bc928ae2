// Package widgets holds Tandem's reusable Fyne widgets: device chips on a
// drag-and-drop placement canvas, per-device memory bars, model cards,
// notices, an acceptance meter and the chat transcript.
//
// Widgets are fed plain values (labels, byte counts, strings) and report
// user actions through callbacks; they know nothing about the engine and
// never start goroutines, so app/ decides what runs where and calls fyne.Do.
package widgets
