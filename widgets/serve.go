package widgets

import (
	"strconv"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// ServeState is what the server control shows.
type ServeState struct {
	Ready   bool   // models are loaded: the server can start
	Running bool   // listening
	Busy    bool   // starting or stopping
	URL     string // the base URL clients use, while running
	Status  string // a sentence when not running: why not, or what went wrong
	Error   bool   // Status is a problem
}

// ServeControl starts and stops an OpenAI-compatible server on the loaded
// models: an address (host:port), an API key, how many requests the
// models decode together (tandem serve --parallel), Start/Stop, and the
// base URL while it runs (selectable, to copy into a client).
type ServeControl struct {
	widget.BaseWidget
	// OnStart is called with the address and key fields when Start is tapped.
	OnStart func(addr, key string)
	// OnStop is called when Stop is tapped.
	OnStop func()
	// OnParallel is called with the requests to decode together when the
	// user chooses another number (not by SetParallel).
	OnParallel func(n int)

	Addr     *widget.Entry
	Key      *widget.Entry
	Parallel *widget.Select // "1", "2", "4", "8", "16"; read with ParallelValue
	quiet    bool           // SetParallel is selecting: no OnParallel
	button   *widget.Button
	url      *widget.Label
	state    ServeState
	content  fyne.CanvasObject
}

// NewServeControl is a stopped control whose server cannot start yet.
func NewServeControl() *ServeControl {
	s := &ServeControl{Addr: widget.NewEntry(), Key: widget.NewPasswordEntry(), url: widget.NewLabel("")}
	s.Addr.SetPlaceHolder("127.0.0.1, any free port")
	s.Key.SetPlaceHolder("API key")
	s.url.Selectable = true
	s.url.Truncation = fyne.TextTruncateEllipsis
	s.button = widget.NewButtonWithIcon("Serve", theme.MediaPlayIcon(), s.tapped)
	s.Parallel = widget.NewSelect(parallelChoices(), func(v string) {
		if n, err := strconv.Atoi(v); err == nil && !s.quiet && s.OnParallel != nil {
			s.OnParallel(n)
		}
	})
	s.SetParallel(1)
	h := s.Addr.MinSize().Height
	s.content = container.NewBorder(nil, nil,
		container.NewHBox(widget.NewLabel("API server"),
			container.NewGridWrap(fyne.NewSize(190, h), s.Addr),
			container.NewGridWrap(fyne.NewSize(130, h), s.Key),
			widget.NewLabel("At once"), s.Parallel, s.button),
		nil, s.url)
	s.ExtendBaseWidget(s)
	s.Set(ServeState{})
	return s
}

// parallelChoices are the numbers of requests the control offers to
// decode together.
func parallelChoices() []string { return []string{"1", "2", "4", "8", "16"} }

// SetParallel shows n requests decoded together, without OnParallel; a
// number not offered is added to the choices.
func (s *ServeControl) SetParallel(n int) {
	v := strconv.Itoa(max(1, n))
	opts := s.Parallel.Options
	found := false
	for _, o := range opts {
		found = found || o == v
	}
	if !found {
		s.Parallel.Options = append(append([]string(nil), opts...), v)
	}
	s.quiet = true
	s.Parallel.SetSelected(v)
	s.quiet = false
}

// ParallelValue is the number of requests chosen to decode together.
func (s *ServeControl) ParallelValue() int {
	n, err := strconv.Atoi(s.Parallel.Selected)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

func (s *ServeControl) tapped() {
	switch {
	case s.state.Running:
		if s.OnStop != nil {
			s.OnStop()
		}
	case s.OnStart != nil:
		s.OnStart(s.Addr.Text, s.Key.Text)
	}
}

// Set shows st.
func (s *ServeControl) Set(st ServeState) {
	s.state = st
	if st.Running {
		s.button.SetText("Stop")
		s.button.SetIcon(theme.MediaStopIcon())
	} else {
		s.button.SetText("Serve")
		s.button.SetIcon(theme.MediaPlayIcon())
	}
	if st.Busy || !st.Running && !st.Ready {
		s.button.Disable()
	} else {
		s.button.Enable()
	}
	// The address is fixed while a server listens on it, and so are the
	// requests it decodes together.
	for _, e := range []fyne.Disableable{s.Addr, s.Key, s.Parallel} {
		if st.Running || st.Busy {
			e.Disable()
		} else {
			e.Enable()
		}
	}
	text := st.Status
	if st.Running {
		text = st.URL
	}
	s.url.SetText(text)
	s.url.Importance = widget.MediumImportance
	switch {
	case st.Running:
		s.url.Importance = widget.SuccessImportance
	case st.Error:
		s.url.Importance = widget.DangerImportance
	}
	s.url.Refresh()
}

// State is what is shown.
func (s *ServeControl) State() ServeState { return s.state }

// Tap taps Start or Stop, as the user would.
func (s *ServeControl) Tap() {
	if !s.button.Disabled() {
		s.button.OnTapped()
	}
}

func (s *ServeControl) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(s.content)
}
