package widgets

import (
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
)

func TestServeControl(t *testing.T) {
	test.NewTempApp(t)
	s := NewServeControl()
	w := test.NewTempWindow(t, s)
	w.Resize(fyne.NewSize(900, 80))
	var started [][2]string
	stops := 0
	s.OnStart = func(addr, key string) { started = append(started, [2]string{addr, key}) }
	s.OnStop = func() { stops++ }

	s.Set(ServeState{Status: "Load the models first."})
	serve := buttonsNamed(s, "Serve")
	if len(serve) != 1 || !serve[0].Disabled() {
		t.Fatal("Serve is not there, or enabled with nothing loaded")
	}
	test.Tap(serve[0])
	if len(started) != 0 || s.url.Text != "Load the models first." {
		t.Fatalf("started %v, status %q", started, s.url.Text)
	}

	s.Set(ServeState{Ready: true})
	test.Type(s.Addr, "127.0.0.1:8081")
	test.Type(s.Key, "secret")
	test.Tap(serve[0])
	if len(started) != 1 || started[0] != [2]string{"127.0.0.1:8081", "secret"} {
		t.Fatalf("OnStart got %v", started)
	}

	s.Set(ServeState{Running: true, URL: "http://127.0.0.1:8081/v1"})
	stop := buttonsNamed(s, "Stop")
	if len(stop) != 1 || stop[0].Disabled() || !s.Addr.Disabled() || !s.Key.Disabled() {
		t.Fatal("while running: no enabled Stop, or the address can still be edited")
	}
	if s.url.Text != "http://127.0.0.1:8081/v1" || s.url.Importance != widget.SuccessImportance {
		t.Errorf("running shows %q (%v)", s.url.Text, s.url.Importance)
	}
	s.Tap()
	if stops != 1 || len(started) != 1 {
		t.Errorf("Stop: %d stops, %d starts", stops, len(started))
	}

	s.Set(ServeState{Ready: true, Status: "Address in use.", Error: true})
	if s.Addr.Disabled() || s.url.Importance != widget.DangerImportance || len(buttonsNamed(s, "Serve")) != 1 {
		t.Error("a failed start does not show the error beside an enabled Serve")
	}
}
