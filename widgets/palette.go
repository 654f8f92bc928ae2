package widgets

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
)

// Category is a kind of memory a device holds, as the planner counts it.
type Category int

const (
	Weights Category = iota
	Embedding
	Head
	KV
	Scratch
	Draft
	Overhead
	// Experts are routed experts kept apart from their blocks, in system
	// RAM with --cpu-moe; the legend lists them only when a device holds some.
	Experts
)

// Categories are all of them but Experts, in the order the bars stack them.
func Categories() []Category {
	return []Category{Weights, Embedding, Head, KV, Scratch, Draft, Overhead}
}

func (c Category) String() string {
	switch c {
	case Weights:
		return "weights"
	case Embedding:
		return "embedding"
	case Head:
		return "head"
	case KV:
		return "KV cache"
	case Scratch:
		return "scratch"
	case Draft:
		return "draft"
	case Overhead:
		return "overhead"
	case Experts:
		return "experts"
	}
	return "other"
}

// Color is the category's colour; fixed across themes so the legend reads
// the same in light and dark mode.
func (c Category) Color() color.Color {
	switch c {
	case Weights:
		return color.NRGBA{R: 0x3b, G: 0x82, B: 0xf6, A: 0xff}
	case Embedding:
		return color.NRGBA{R: 0x14, G: 0xb8, B: 0xa6, A: 0xff}
	case Head:
		return color.NRGBA{R: 0x8b, G: 0x5c, B: 0xf6, A: 0xff}
	case KV:
		return color.NRGBA{R: 0xf5, G: 0x9e, B: 0x0b, A: 0xff}
	case Scratch:
		return color.NRGBA{R: 0x94, G: 0xa3, B: 0xb8, A: 0xff}
	case Draft:
		return color.NRGBA{R: 0x22, G: 0xc5, B: 0x5e, A: 0xff}
	case Experts:
		return color.NRGBA{R: 0xec, G: 0x48, B: 0x99, A: 0xff}
	}
	return color.NRGBA{R: 0x64, G: 0x74, B: 0x8b, A: 0xff}
}

// overColor marks memory beyond a device's capacity.
func overColor() color.Color { return color.NRGBA{R: 0xdc, G: 0x26, B: 0x26, A: 0xff} }

// themeColor is a colour of the current theme and variant.
func themeColor(name fyne.ThemeColorName) color.Color { return theme.Color(name) }

// withAlpha is c with alpha a.
func withAlpha(c color.Color, a uint8) color.Color {
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	n.A = a
	return n
}
