module github.com/tandem-run/tandem

go 1.26.0

require (
	fyne.io/fyne/v2 v2.7.1 // indirect
	github.com/NVIDIA/go-nvml v0.13.4-1 // indirect
	github.com/TheTitanrain/w32 v0.0.0-20180517000239-4f5cfb03fabf // indirect
	github.com/dlclark/regexp2/v2 v2.13.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/sqweek/dialog v0.0.0-20260123140253-64c163d53aac // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)
